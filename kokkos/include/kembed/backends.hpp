#pragma once
// The execution spaces of the Kokkos kembed was built with, by the names the
// program and the benchmarks take ("serial", "openmp", "cuda", "hip"; "default" is
// Kokkos' default space). Nothing assumes a backend beyond what Kokkos was built
// with: a GPU cluster's Kokkos often has no Serial.
#include <Kokkos_Core.hpp>
#include <kembed/core/error.hpp>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kembed {

#if defined(KOKKOS_ENABLE_HIP)
#if KOKKOS_VERSION >= 40000
using HipSpace = Kokkos::HIP;
#else
using HipSpace = Kokkos::Experimental::HIP;  // Kokkos 3's name
#endif
#endif

// The names on_backend takes, in this build, "default" first.
inline std::vector<std::string> backend_names() {
  std::vector<std::string> names{"default"};
#if defined(KOKKOS_ENABLE_SERIAL)
  names.push_back("serial");
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  names.push_back("openmp");
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  names.push_back("cuda");
#endif
#if defined(KOKKOS_ENABLE_HIP)
  names.push_back("hip");
#endif
  return names;
}

// Throws the InvalidArgument on_backend would for a name this build lacks;
// callable before Kokkos is initialised.
inline void check_backend(std::string const& name) {
  std::string have;
  for (auto const& n : backend_names()) {
    if (n == name) return;
    have += (have.empty() ? "" : ", ") + n;
  }
  throw InvalidArgument("backend", "backend '" + name + "' is not in this build (its Kokkos " +
                                       std::to_string(KOKKOS_VERSION / 10000) + "." +
                                       std::to_string(KOKKOS_VERSION / 100 % 100) + " has " + have + ")");
}

// Whether the backend `name` runs on host threads whose number the caller may set
// (KOKKOS_NUM_THREADS); "default" resolved first.
inline bool backend_has_threads(std::string const& name) {
#if defined(KOKKOS_ENABLE_OPENMP)
  if (name == "openmp") return true;
  if (name == "default") return std::is_same<Kokkos::DefaultExecutionSpace, Kokkos::OpenMP>::value;
#endif
  (void)name;
  return false;
}

// Calls f(space) with an instance of the execution space `name` names; an unknown or
// absent backend is an InvalidArgument that lists the ones this build has.
template <class F>
decltype(auto) on_backend(std::string const& name, F&& f) {
#if defined(KOKKOS_ENABLE_SERIAL)
  if (name == "serial") return std::forward<F>(f)(Kokkos::Serial());
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  if (name == "openmp") return std::forward<F>(f)(Kokkos::OpenMP());
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  if (name == "cuda") return std::forward<F>(f)(Kokkos::Cuda());
#endif
#if defined(KOKKOS_ENABLE_HIP)
  if (name == "hip") return std::forward<F>(f)(HipSpace());
#endif
  check_backend(name);
  return std::forward<F>(f)(Kokkos::DefaultExecutionSpace());  // "default"
}

}  // namespace kembed
