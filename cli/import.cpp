// kembed import: a table made by another tool (any 2-D float dataset: h5py, Keras
// weight files, ...) into a kembed table file, bit for bit for float32 and rounded
// to the nearest float32 for float64/float16 only when --convert asks for it.
#include "commands.hpp"
#include "console.hpp"
#include <kembed/job/paths.hpp>

#include <kembed/io/describe.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/table_file.hpp>

#include <cstdio>

namespace kembed::cli {

int import_table(ImportArgs const& a) {
  if (job::same_file(a.out, a.from))
    throw InvalidArgument("out", "--out " + a.out + " is the file being imported; give --out a path of its own");
  job::check_output_path("--out", a.out);
  std::string dataset = a.dataset;
  if (dataset.empty()) {
    // Without --dataset, the file's one 2-D float dataset; several or none: say which exist.
    std::vector<std::string> candidates;
    for (auto const& d : io::describe_file(a.from).datasets)
      if (d.shape.size() == 2 && d.type.find("-bit floats") != std::string::npos)
        candidates.push_back(d.path + " " + std::to_string(d.shape[0]) + " x " + std::to_string(d.shape[1]));
    if (candidates.size() != 1) {
      std::string list;
      for (auto const& c : candidates) list += (list.empty() ? "" : ", ") + c;
      throw InvalidArgument("dataset", a.from +
                                           (candidates.empty() ? " holds no 2-D float dataset"
                                                               : " holds several 2-D float datasets (" + list + ")") +
                                           "; name the table with --dataset");
    }
    dataset = candidates.front().substr(0, candidates.front().find(' '));
  }
  auto table = io::read_table_dataset(a.from, dataset, a.convert);
  auto const config = make_config(table.config.num_embeddings, table.config.embedding_dim, a.options);
  io::SaveOptions save;
  save.deflate = a.deflate;
  io::save_table(a.out, table.weight.data(), config, save);
  std::printf("table:      %s (%s x %s, from %s:%s%s)\n", a.out.c_str(), with_commas(config.num_embeddings).c_str(),
              with_commas(config.embedding_dim).c_str(), a.from.c_str(), dataset.c_str(),
              a.convert ? ", rounded to float32 where it was not" : "");
  return Exit::ok;
}

}  // namespace kembed::cli
