#pragma once
// save / load for kembed::Embedding: the table and every setting, bit for bit.
#include <kembed/embedding.hpp>
#include <kembed/io/table_file.hpp>

#include <string>

namespace kembed::io {

template <class ExecutionSpace>
void save(Embedding<ExecutionSpace> const& layer, std::string const& path, SaveOptions const& options = {}) {
  auto const weight = layer.weight_host();
  save_table(path, weight.data(), layer.config(), options);
}

template <class ExecutionSpace = Kokkos::DefaultExecutionSpace>
Embedding<ExecutionSpace> load(std::string const& path, ExecutionSpace const& space = ExecutionSpace()) {
  auto const file = load_table(path);
  auto const options = options_of(file.config);  // every setting the file holds
  auto const v = file.config.num_embeddings, d = file.config.embedding_dim;
  return Embedding<ExecutionSpace>(space, v, d, FloatsRef(file.weight.data(), Shape{v, d}), options);
}

}  // namespace kembed::io
