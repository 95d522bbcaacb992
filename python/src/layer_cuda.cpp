// The layers on Kokkos::Cuda (a CUDA build's module): device arrays by DLPack.
#include "bag_layer_on.hpp"
#include "optim_on.hpp"

#if defined(KOKKOS_ENABLE_CUDA)
template std::unique_ptr<kembed::python::Layer> kembed::python::make_layer_on<Kokkos::Cuda>(
    char const*, std::int64_t, std::int64_t, float*, bool, kembed::Options const&);
template std::unique_ptr<kembed::python::BagLayer> kembed::python::make_bag_layer_on<Kokkos::Cuda>(
    char const*, std::int64_t, std::int64_t, float*, bool, kembed::BagOptions const&);
template std::unique_ptr<kembed::python::Optim> kembed::python::make_optim_on<Kokkos::Cuda>(
    char const*, kembed::OptimSettings const&, std::int64_t, std::int64_t);
#endif
