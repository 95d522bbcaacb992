#include <kembed/embedding.hpp>
#include <kembed/io/embedding_io.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::vector<float> table{1, 2, 3, 4, 5, 6};
  kembed::Embedding<> layer(3, 2, kembed::FloatsRef(table.data(), kembed::Shape{3, 2}));
  std::vector<std::int64_t> ids{2, 0, 2};
  std::vector<float> dy{1, 1, 1, 1, 1, 1};
  auto g = layer.backward(kembed::IdsRef(ids), kembed::FloatsRef(dy.data(), kembed::Shape{3, 2}));
  bool ok = g.values == std::vector<float>{1, 1, 0, 0, 2, 2} && g.counts == std::vector<std::int64_t>{1, 0, 2};
  kembed::io::save(layer, "consumer-table.h5");
  ok = ok && kembed::io::load<>("consumer-table.h5").weight_host() == table;
  std::printf("consumer: %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
