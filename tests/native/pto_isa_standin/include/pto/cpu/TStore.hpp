// Stand-in (shmcomm tests): tile -> GM (the TSTORE_IMPL overloads of pto-isa's CPU back end,
// by their declarations; the quantizing ones store as the plain one).
#ifndef STANDIN_TSTORE_HPP
#define STANDIN_TSTORE_HPP
namespace pto {
template <typename TileData, typename GlobalData, bool add>
PTO_INTERNAL void standin_store(GlobalData& dst, TileData& src)
{
    int64_t k = 0;
    for (int64_t i0 = 0; i0 < dst.GetShape(0); ++i0)
        for (int64_t i1 = 0; i1 < dst.GetShape(1); ++i1)
            for (int64_t i2 = 0; i2 < dst.GetShape(2); ++i2)
                for (int64_t i3 = 0; i3 < dst.GetShape(3); ++i3)
                    for (int64_t i4 = 0; i4 < dst.GetShape(4); ++i4) {
                        auto* p = dst.data() + i0 * dst.GetStride(0) + i1 * dst.GetStride(1) +
                                  i2 * dst.GetStride(2) + i3 * dst.GetStride(3) + i4 * dst.GetStride(4);
                        if (add) *p += src.data()[k++];
                        else *p = src.data()[k++];
                    }
}

template <typename TileData, typename GlobalData, AtomicType atomicType, STPhase Phase = STPhase::Unspecified>
PTO_INTERNAL void TSTORE_IMPL(GlobalData& dst, TileData& src)
{
    standin_store<TileData, GlobalData, atomicType == AtomicType::AtomicAdd>(dst, src);
}

template <
    typename TileData, typename GlobalData, AtomicType atomicType, ReluPreMode reluPreMode,
    STPhase Phase = STPhase::Unspecified>
PTO_INTERNAL void TSTORE_IMPL(GlobalData& dst, TileData& src)
{
    standin_store<TileData, GlobalData, atomicType == AtomicType::AtomicAdd>(dst, src);
}

template <
    typename TileData, typename GlobalData, AtomicType atomicType, ReluPreMode reluPreMode,
    STPhase Phase = STPhase::Unspecified>
PTO_INTERNAL void TSTORE_IMPL(GlobalData& dst, TileData& src, uint64_t preQuantScalar)
{
    (void)preQuantScalar;
    standin_store<TileData, GlobalData, atomicType == AtomicType::AtomicAdd>(dst, src);
}

template <
    typename TileData, typename GlobalData, typename FpTileData, AtomicType atomicType, ReluPreMode reluPreMode,
    STPhase Phase = STPhase::Unspecified>
PTO_INTERNAL void TSTORE_IMPL(GlobalData& dst, TileData& src, FpTileData& fp)
{
    (void)fp;
    standin_store<TileData, GlobalData, atomicType == AtomicType::AtomicAdd>(dst, src);
}
}  // namespace pto
#endif
