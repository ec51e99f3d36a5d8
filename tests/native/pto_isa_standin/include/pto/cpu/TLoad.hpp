// Stand-in (shmcomm tests): the tile library, which shmcomm leaves native.
#ifndef STANDIN_TLOAD_HPP
#define STANDIN_TLOAD_HPP
namespace pto {
template <typename TileT, typename G>
inline void TLOAD(TileT& tile, G& g) {
    for (int i = 0; i < TileT::Rows * TileT::Cols; ++i) tile.data()[i] = g.data()[i];
}
template <typename G, typename TileT>
inline void TSTORE(G& g, TileT& tile) {
    for (int i = 0; i < TileT::Rows * TileT::Cols; ++i) g.data()[i] = tile.data()[i];
}
template <typename TileT>
inline void TADDS(TileT& dst, TileT& src, typename TileT::DType s) {
    for (int i = 0; i < TileT::Rows * TileT::Cols; ++i) dst.data()[i] = src.data()[i] + s;
}
}  // namespace pto
#endif
