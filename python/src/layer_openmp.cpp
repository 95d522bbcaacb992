// The layers on Kokkos::OpenMP, in its own translation unit (the kernels compile in parallel).
#include "bag_layer_on.hpp"
#include "optim_on.hpp"

#if defined(KOKKOS_ENABLE_OPENMP)
template std::unique_ptr<kembed::python::Layer> kembed::python::make_layer_on<Kokkos::OpenMP>(
    char const*, std::int64_t, std::int64_t, float*, bool, kembed::Options const&);
template std::unique_ptr<kembed::python::BagLayer> kembed::python::make_bag_layer_on<Kokkos::OpenMP>(
    char const*, std::int64_t, std::int64_t, float*, bool, kembed::BagOptions const&);
template std::unique_ptr<kembed::python::Optim> kembed::python::make_optim_on<Kokkos::OpenMP>(
    char const*, kembed::OptimSettings const&, std::int64_t, std::int64_t);
#endif
