// Stand-in (shmcomm tests): GM -> tile, element by element over the 5-D shape (the shape of
// pto-isa's CPU TLOAD_IMPL; shmcomm's shadow renames it and decides when it runs).
#ifndef STANDIN_TLOAD_HPP
#define STANDIN_TLOAD_HPP
namespace pto {
template <typename TileData, typename GlobalData>
PTO_INTERNAL void TLOAD_IMPL(TileData& dst, GlobalData& src)
{
    int64_t k = 0;
    for (int64_t i0 = 0; i0 < src.GetShape(0); ++i0)
        for (int64_t i1 = 0; i1 < src.GetShape(1); ++i1)
            for (int64_t i2 = 0; i2 < src.GetShape(2); ++i2)
                for (int64_t i3 = 0; i3 < src.GetShape(3); ++i3)
                    for (int64_t i4 = 0; i4 < src.GetShape(4); ++i4)
                        dst.data()[k++] = src.data()[i0 * src.GetStride(0) + i1 * src.GetStride(1) +
                                                     i2 * src.GetStride(2) + i3 * src.GetStride(3) +
                                                     i4 * src.GetStride(4)];
}

// a vector instruction: native and immediate under shmcomm
template <typename TileD, typename TileS>
inline void TADDS(TileD& dst, TileS& src, typename TileS::DType s) {
    for (int i = 0; i < TileD::Rows * TileD::Cols; ++i) dst.data()[i] = src.data()[i] + s;
}
}  // namespace pto
#endif
