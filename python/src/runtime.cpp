// Kokkos inside a Python process: started by the first layer, with the thread count
// asked for before it; the layer on the backend a name chooses.
#include "layer.hpp"
#include "optim.hpp"

#include <kembed/backends.hpp>
#include <kembed/detail/memory.hpp>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace kembed::python {

namespace {

std::mutex start_mutex;
int wanted_threads = 0;  // 0: KEMBED_NUM_THREADS, else the OpenMP runtime's default

int threads_from_environment() {
  char const* text = std::getenv("KEMBED_NUM_THREADS");
  if (!text || !*text) return 0;
  char* end = nullptr;
  long const n = std::strtol(text, &end, 10);
  if (*end != '\0' || n < 1 || n > 512)
    throw InvalidArgument("threads", "KEMBED_NUM_THREADS is '" + std::string(text) + "'; want a whole number from 1 to 512");
  return static_cast<int>(n);
}

void start_locked() {
  if (Kokkos::is_initialized()) return;
  int const threads = wanted_threads ? wanted_threads : threads_from_environment();
  setenv("KOKKOS_DISABLE_WARNINGS", "1", 0);  // Kokkos prints on stdout, the user's channel
  try {
#if KOKKOS_VERSION >= 40000
    Kokkos::InitializationSettings settings;
    if (threads) settings.set_num_threads(threads);
    Kokkos::initialize(settings);
#else
    Kokkos::InitArguments arguments;
    if (threads) arguments.num_threads = threads;
    Kokkos::initialize(arguments);
#endif
  } catch (std::exception const& e) {  // a CUDA build's module on a machine without a GPU or driver
    throw std::runtime_error(std::string("kembed: Kokkos could not start (") + e.what() +
                             "); this module was built with " + Kokkos::DefaultExecutionSpace::name() +
                             ", which needs its device: build the host-only module (pip install .) to run without one");
  }
  // Kokkos is not finalized at exit: layers Python frees later would outlive it.
}

}  // namespace

void start_kokkos() {
  std::lock_guard<std::mutex> lock(start_mutex);
  start_locked();
}

int num_threads() {
  start_kokkos();
  return Kokkos::DefaultHostExecutionSpace().concurrency();
}

void set_num_threads(int threads) {
  if (threads < 1 || threads > 512)
    throw InvalidArgument("threads", "set_num_threads(" + std::to_string(threads) + "): want 1 to 512 threads");
  std::lock_guard<std::mutex> lock(start_mutex);
  if (Kokkos::is_initialized()) {
    int const have = Kokkos::DefaultHostExecutionSpace().concurrency();
    if (have == threads) return;
    throw InvalidArgument("threads", "kembed already runs with " + std::to_string(have) +
                                         " threads, fixed when its first layer was made; call set_num_threads(" +
                                         std::to_string(threads) + ") before that, or set KEMBED_NUM_THREADS");
  }
  wanted_threads = threads;
}

Buffer new_host_floats(std::int64_t rows, std::int64_t cols) {
  start_kokkos();
  auto m = detail::uninitialized_matrix(Kokkos::DefaultHostExecutionSpace(), "kembed::python::output", rows, cols);
  Buffer out;
  out.data = m.data();
  out.owner = std::make_shared<decltype(m)>(std::move(m));
  return out;
}

std::vector<std::string> backends() {
  std::vector<std::string> names;
  for (auto const& n : backend_names())
    if (n != "default" && n != "hip") names.push_back(n);
  return names;
}

namespace {

// Calls f(space, name) on the backend a name chooses ("default": the default host space).
template <class F>
auto on_backend(std::string const& backend, F&& f) {
  check_backend(backend);
  start_kokkos();
  std::string name = backend;
  if (name == "default") {  // the default host space: a device build's default is a device
#if defined(KOKKOS_ENABLE_OPENMP)
    name = std::is_same<Kokkos::DefaultHostExecutionSpace, Kokkos::OpenMP>::value ? "openmp" : "serial";
#else
    name = "serial";  // a Kokkos may have OpenMP without Serial (Debian's Kokkos 5 package)
#endif
  }
#if defined(KOKKOS_ENABLE_OPENMP)
  if (name == "openmp") return f(Kokkos::OpenMP(), "openmp");
#endif
#if defined(KOKKOS_ENABLE_SERIAL)
  if (name == "serial") return f(Kokkos::Serial(), "serial");
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  if (name == "cuda") return f(Kokkos::Cuda(), "cuda");
#endif
  throw InvalidArgument("backend", "backend '" + backend + "' has no Python layer in this build (docs/PYTHON.md, Devices)");
}

}  // namespace

std::unique_ptr<Layer> make_layer(std::string const& backend, std::int64_t v, std::int64_t d, float* weight,
                                  bool borrowed, Options const& options) {
  return on_backend(backend, [&](auto space, char const* name) -> std::unique_ptr<Layer> {
    return make_layer_on<decltype(space)>(name, v, d, weight, borrowed, options);
  });
}

std::unique_ptr<BagLayer> make_bag_layer(std::string const& backend, std::int64_t v, std::int64_t d, float* weight,
                                         bool borrowed, BagOptions const& options) {
  return on_backend(backend, [&](auto space, char const* name) -> std::unique_ptr<BagLayer> {
    return make_bag_layer_on<decltype(space)>(name, v, d, weight, borrowed, options);
  });
}

std::unique_ptr<Optim> make_optim(std::string const& backend, OptimSettings const& settings, std::int64_t v,
                                  std::int64_t d) {
  return on_backend(backend, [&](auto space, char const* name) -> std::unique_ptr<Optim> {
    return make_optim_on<decltype(space)>(name, settings, v, d);
  });
}

}  // namespace kembed::python
