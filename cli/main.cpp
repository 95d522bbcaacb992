// kembed: the batch job and its tools. See `kembed --help` and docs/CLI.md.
#include "commands.hpp"
#include "console.hpp"
#include "mpi_session.hpp"

#include <kembed/backends.hpp>
#include <kembed/io/batch_process.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/optim_file.hpp>
#include <kembed/version.hpp>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>

#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace kembed::cli;

std::string first_line(char const* text) {
  std::string const s(text);
  return s.substr(0, s.find('\n'));
}

std::string backend_list() {
  std::string names;
  for (auto const& n : kembed::backend_names()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

// Kokkos 3.4's OpenMP set-up crashes past this many threads; nobody needs more on a node.
constexpr int max_threads = 512;

// Refuses a thread count the chosen backend cannot run, before Kokkos starts.
void check_threads(std::string const& backend, std::optional<int> given) {
  if (!given) return;  // OMP_NUM_THREADS or every core
  int const threads = *given;
  if (threads < 1 || threads > max_threads)
    throw kembed::InvalidArgument("threads", "--threads must be between 1 and " + std::to_string(max_threads) +
                                                 ", got " + std::to_string(threads));
  if (threads > 1 && !kembed::backend_has_threads(backend)) {
    std::string name = backend == "default" ? std::string(Kokkos::DefaultExecutionSpace::name()) : backend;
    for (auto& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
    throw kembed::InvalidArgument("threads", "--threads " + std::to_string(threads) + " asks for " +
                                                 std::to_string(threads) + " threads, but the " + name + " backend " +
                                                 (name == "serial" ? "runs one" : "takes no thread count") +
                                                 "; use --backend openmp, or leave --threads out");
  }
}

// Runs f on the chosen backend; Kokkos lives only while a command needs it.
template <class F>
int on_backend(std::string const& backend, std::optional<int> threads, F&& f) {
  check_threads(backend, threads);
  kembed::check_backend(backend);  // before Kokkos starts
  if (threads) setenv("KOKKOS_NUM_THREADS", std::to_string(*threads).c_str(), 1);
  setenv("KOKKOS_DISABLE_WARNINGS", "1", 0);  // Kokkos prints its warnings on stdout, where results go
  int argc = 1;
  char name[] = "kembed";
  char* argv[] = {name, nullptr};
  std::optional<Kokkos::ScopeGuard> guard;
  try {
    guard.emplace(argc, argv);
  } catch (std::exception const& e) {  // e.g. a CUDA build on a node without a GPU or driver
    throw kembed::InvalidArgument(
        "backend", "Kokkos could not start (" + first_line(e.what()) +
                       "); on a machine without this build's device, choose a host backend with --backend (this "
                       "build has " + backend_list() + ")");
  }
  return kembed::on_backend(backend, std::forward<F>(f));
}

// A setting read as CLI11 parses the command line, by kembed's own parser: the
// commands get typed settings, and a bad value is refused in kembed's words before
// anything starts (main reports it, exit 2).
template <class T, class Parse>
CLI::Option* add_setting(CLI::App* cmd, std::string const& flag, T& into, Parse parse, std::string const& help) {
  return cmd->add_option_function<std::string>(
      flag, [&into, parse](std::string const& text) { into = parse(text); }, help);
}

double parse_norm_type(std::string const& text) {
  char* end = nullptr;
  double const p = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    throw kembed::InvalidArgument("norm_type", "--norm-type must be a number > 0 or inf, got '" + text + "'");
  return p;  // make_config checks > 0
}

kembed::Pooling parse_pooling_flag(std::string const& text) {
  for (auto p : {kembed::Pooling::sum, kembed::Pooling::mean, kembed::Pooling::max})
    if (text == kembed::to_string(p)) return p;
  throw kembed::InvalidArgument("pooling", "--pooling must be sum, mean or max, got '" + text + "'");
}

// The settings a table file stores (make-table, import): the plan and mode the
// file asks for, and torch's other options.
void add_table_options(CLI::App* cmd, kembed::Options& o) {
  cmd->add_option("--padding-idx", o.padding_idx,
                  "Padding row as torch takes it: negative counts from the end, -1 is row V-1 (default: none)");
  add_setting(cmd, "--plan", o.plan, kembed::parse_plan, "Plan stored in the file")->default_str("auto");
  add_setting(cmd, "--mode", o.mode, kembed::parse_mode, "Numeric mode stored in the file")->default_str("identical");
  cmd->add_option("--max-norm", o.max_norm,
                  "Renormalise each row a forward references whose norm exceeds this (torch's max_norm)");
  add_setting(cmd, "--norm-type", o.norm_type, parse_norm_type, "The norm --max-norm uses: a number > 0, or inf")
      ->default_str("2");
  add_setting(cmd, "--scale-grad-by-freq", o.scale_grad_by_freq, kembed::parse_freq_scale,
              "Scale each gradient term by 1 / its row's count: none, call (per microbatch) or batch")
      ->default_str("none");
  cmd->add_flag("--sparse", o.sparse, "Mark the table's gradient as row-sparse");
}

// OpenMP's idle threads spin while the job reads, hashes and writes, and between
// its kernels; on a busy machine that spinning takes the cores the job and the other
// work need (the bundled job at --microbatch 97 beside 4 busy loops: 0.38 s active,
// 0.12 s passive, docs/PERFORMANCE.md). The OpenMP runtime reads OMP_WAIT_POLICY when
// it loads, before main, so a job that may use OpenMP re-executes itself once with
// the policy set, unless the user chose one.
// Not where OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY are set: the runtime has
// then already bound this thread to one place, the new image would inherit that
// one-CPU mask and run one thread (seen with scripts/run.sh's spread binding).
void prefer_passive_waiting(int argc, char** argv) {
#ifdef KOKKOS_ENABLE_OPENMP
  for (char const* name : {"OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"})
    if (std::getenv(name) != nullptr) return;
  bool job = false;
  for (int i = 1; i < argc; ++i)
    job = job || !std::strcmp(argv[i], "backward") || !std::strcmp(argv[i], "forward") || !std::strcmp(argv[i], "step");
  if (!job) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);  // the same process (pid), argv and environment but this
  // Only if that failed: go on with the runtime's default policy.
#else
  (void)argc, (void)argv;
#endif
}

// Under mpiexec: `backward`, `forward` and `step` run as one job over the ranks; other
// commands (and a build without MPI) would each run whole on every rank, so more than
// one is refused.
void start_ranks(bool backward, std::optional<MpiSession>& session) {
#if defined(KEMBED_CLI_MPI)
  if (backward) {
    session.emplace();
    return;
  }
#else
  (void)session;
#endif
  int const ranks = launched_ranks();
  if (ranks < 2) return;
  throw kembed::InvalidArgument(
      "mpiexec",
      backward
          ? "this kembed was built without MPI, so each of the " + std::to_string(ranks) +
                " ranks would run the whole job; build with MPI and a parallel HDF5 "
                "(KEMBED_ENABLE_MPI, docs/CLI.md), or run one process"
          : "only `kembed backward`, `kembed forward` and `kembed step` run on many MPI ranks; run this command as "
            "one process");
}

CLI::App* add_backward(CLI::App& app, BackwardArgs& bw) {
  auto* backward = app.add_subcommand("backward", "Gradient of a batch file, in microbatches, into a run file");
  backward->add_option("--table", bw.table, "Table file (kembed-embedding-1)")->required();
  backward
      ->add_option("--batch", bw.batch,
                   "Batch file: ids (T,) and dy (T, d); or a bag batch: ids, offsets (B + 1,) and dy (B, d)")
      ->required();
  backward->add_option("--out", bw.out, "Run file to write (kembed-run-1)")->required();
  backward->add_option("--microbatch", bw.microbatch,
                       "Positions per backward call in mode deterministic, whose sums depend on the split; "
                       "other modes fold each block read (64 Ki positions or more) in one call: their bits do not")
      ->capture_default_str();
  add_setting(backward, "--plan", bw.plan, kembed::parse_plan,
              "scan, sort, bucket or auto (default: the table file's)");
  add_setting(backward, "--mode", bw.mode, kembed::parse_mode,
              "identical, deterministic or fast (default: the table file's)");
  auto* padding = backward->add_option("--padding-idx", bw.padding_idx,
                                       "Padding row as torch takes it: negative counts from the end, -1 is row V-1 "
                                       "(default: the table file's)");
  backward->add_flag("--no-padding", bw.no_padding, "No padding row, whatever the table file says")->excludes(padding);
  add_setting(backward, "--pooling", bw.pooling, parse_pooling_flag,
              "sum, mean or max: how a bag batch's bags pool (torch.nn.EmbeddingBag's mode; default sum); with a "
              "bag batch, --microbatch and --checkpoint-every count bags");
  backward->add_flag("--sparse", bw.sparse,
                     "Write a row-sparse run file: the rows the batch references, never a (V, d) gradient "
                     "(also when the table file asks for one)");
  // Given alone, --scale-grad-by-freq means call (as torch).
  auto const scale_of = [](std::string const& text) {
    return text.empty() ? kembed::FreqScale::call : kembed::parse_freq_scale(text);
  };
  auto* scale_option = add_setting(
      backward, "--scale-grad-by-freq", bw.scale_grad_by_freq, scale_of,
      "[call|batch|none] Scale each term by 1 / its row's count: in its microbatch (call, as torch; the "
      "default when given alone) or in the whole batch (batch); none turns it off. Default: the table file's");
  scale_option->expected(0, 1);
  backward->parse_complete_callback([&bw, scale_option] {
    if (scale_option->count() > 0 && !bw.scale_grad_by_freq) bw.scale_grad_by_freq = kembed::FreqScale::call;
  });
  backward->add_option("--ids-dataset", bw.ids_dataset, "Dataset of ids in the batch file")->capture_default_str();
  backward->add_option("--dy-dataset", bw.dy_dataset, "Dataset of dy in the batch file")->capture_default_str();
  backward->add_option("--checkpoint-every", bw.checkpoint_every, "Write a checkpoint every N positions (0: never)")
      ->capture_default_str();
  backward->add_option("--checkpoint", bw.checkpoint, "Checkpoint file (default: OUT.checkpoint)");
  backward->add_flag("--resume", bw.resume, "Continue from the checkpoint, if there is one");
  backward->add_flag("--deflate", bw.deflate, "Compress the run file (shuffle + deflate)");
  add_setting(
      backward, "--fingerprint", bw.fingerprint,
      [](std::string const& text) { return kembed::io::parse_fingerprint(text, "--fingerprint"); },
      "How the run file and checkpoints identify the table and batch: chunks (SHA-256 over the "
      "SHA-256s of their 16 MiB chunks, which every MPI rank shares) or file (sha256sum's whole-file "
      "SHA-256, hashed by one rank); a resume keeps its checkpoint's")
      ->default_str("chunks");
  add_setting(
      backward, "--owners", bw.owners,
      [](std::string const& text) { return kembed::job::parse_row_owners(text, "--owners"); },
      "Under mpiexec, how ranks own the gradient's rows while they fold: spread (row mod P, the hot rows "
      "placed by count after a pass over the ids, so a Zipf head lands on several ranks) or ranges "
      "(contiguous, no pass). The bits and the files are the same either way")
      ->default_str("spread");
  backward->add_option("--run-id", bw.run_id, "Identifier stored in the run file (default: time, pid, random)");
  return backward;
}

CLI::App* add_forward(CLI::App& app, ForwardArgs& fw) {
  auto* forward = app.add_subcommand(
      "forward", "Look up the rows of a batch's ids (or pool a bag batch's bags) into an output file");
  forward->add_option("--table", fw.table, "Table file")->required();
  forward->add_option("--ids", fw.ids, "File with the ids (a batch file)")->required();
  forward->add_option("--out", fw.out, "Output file (kembed-forward-1, dataset /y)")->required();
  forward->add_option("--ids-dataset", fw.ids_dataset, "Dataset of ids")->capture_default_str();
  forward->add_option("--microbatch", fw.microbatch, "Positions (a bag batch's bags) per forward call")
      ->capture_default_str();
  add_setting(forward, "--pooling", fw.pooling, parse_pooling_flag,
              "sum, mean or max: how a bag batch's bags pool into y, one row per bag (default sum)");
  forward->add_option("--max-norm", fw.max_norm,
                      "Renormalise each referenced row whose norm exceeds this, as torch (default: the table file's)");
  add_setting(forward, "--norm-type", fw.norm_type, parse_norm_type,
              "The norm --max-norm uses: a number > 0, or inf (default: 2)");
  return forward;
}

CLI::App* add_diff(CLI::App& app, DiffArgs& df) {
  auto* diff_cmd =
      app.add_subcommand("diff", "Compare two run files (or two tables) bit for bit; exit 0 identical, 1 not");
  diff_cmd->add_option("a", df.a, "First file")->required();
  diff_cmd->add_option("b", df.b, "Second file")->required();
  diff_cmd->add_flag("--json", df.json, "One JSON object on stdout, for scripts");
  diff_cmd->add_option("--rows", df.rows, "Differing rows to list")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  return diff_cmd;
}

CLI::App* add_info(CLI::App& app, std::string& info_path, bool& info_check) {
  auto* info_cmd = app.add_subcommand("info", "What a file holds, its format and provenance");
  info_cmd->add_option("file", info_path, "HDF5 file")->required();
  info_cmd->add_flag("--check", info_check,
                     "Also verify every digest and invariant the file carries, reading all of its data (exit 2 if "
                     "one fails)");
  return info_cmd;
}

CLI::App* add_make_batch(CLI::App& app, MakeBatchArgs& mb) {
  auto* make_batch_cmd =
      app.add_subcommand("make-batch", "Write a batch file (ids and dy) from a token stream and a seed");
  make_batch_cmd->add_option("--out", mb.out, "Batch file to write")->required();
  make_batch_cmd->add_option("--dim", mb.dim, "Columns of dy (the table's embedding_dim)")->required();
  make_batch_cmd->add_option("--tokens", mb.tokens, "Text file of whitespace-separated token ids");
  make_batch_cmd->add_option("--zipf", mb.zipf_rows, "Or: draw ids from Zipf(1.1) over this many rows");
  make_batch_cmd->add_option("--positions", mb.positions, "Positions T (default: the whole token stream)");
  make_batch_cmd->add_option("--repeat", mb.repeat, "Repeat the token stream this many times")->capture_default_str();
  make_batch_cmd->add_option("--vocab", mb.vocab, "Rows the ids index (default: the largest id + 1)");
  make_batch_cmd->add_option("--seed", mb.seed, "Seed of dy (and of --zipf ids)")->capture_default_str();
  make_batch_cmd->add_option("--bags", mb.bags,
                             "A bag batch (for EmbeddingBag): B bags cut at random points, dy (B, d)");
  make_batch_cmd->add_option("--bag-size", mb.bag_size, "Or: bags of L positions each (the last may be shorter)");
  make_batch_cmd->add_flag("--weighted", mb.weighted, "Give a bag batch per_sample_weights in [-1, 1)");
  return make_batch_cmd;
}

CLI::App* add_make_table(CLI::App& app, MakeTableArgs& mt) {
  auto* make_table_cmd =
      app.add_subcommand("make-table", "Write a table file of uniform values in [-1, 1) from a seed");
  make_table_cmd->add_option("--out", mt.out, "Table file to write")->required();
  make_table_cmd->add_option("--rows", mt.rows, "num_embeddings")->required();
  make_table_cmd->add_option("--dim", mt.dim, "embedding_dim")->required();
  make_table_cmd->add_option("--seed", mt.seed, "Seed")->capture_default_str();
  add_table_options(make_table_cmd, mt.options);
  return make_table_cmd;
}

CLI::App* add_import(CLI::App& app, ImportArgs& im) {
  auto* import_cmd = app.add_subcommand(
      "import", "Make a table file from a 2-D float dataset written by another tool (h5py, Keras, ...)");
  import_cmd->add_option("from", im.from, "HDF5 file holding the table")->required();
  import_cmd->add_option("--dataset", im.dataset, "Dataset to import (default: the file's only 2-D float dataset)");
  import_cmd->add_option("--out", im.out, "Table file to write (kembed-embedding-1)")->required();
  import_cmd->add_flag("--convert", im.convert,
                       "Round float64 or float16 values to the nearest float32 (values that do not fit are refused)");
  import_cmd->add_flag("--deflate", im.deflate, "Compress the table file (shuffle + deflate)");
  add_table_options(import_cmd, im.options);
  return import_cmd;
}

// The optimizer settings `kembed step` was given, by the names the state file
// writes (torch's arguments), with the flag that gave each.
struct StepFlags {
  struct Given {
    std::string setting, flag;
    double value;
  };
  std::vector<Given> given;
  // Applies them over `s`; a flag the optimizer does not read is refused by name.
  void apply(kembed::OptimSettings& s) const {
    auto const names = kembed::io::setting_names(s.optimizer);
    for (auto const& g : given) {
      if (std::find(names.begin(), names.end(), g.setting) == names.end()) {
        std::string reads;
        for (auto const& n : names) reads += (reads.empty() ? "" : ", ") + n;
        throw kembed::InvalidArgument(g.setting, g.flag + " is not a setting of " +
                                                     std::string(kembed::to_string(s.optimizer)) + " (it reads " +
                                                     reads + ")");
      }
      kembed::io::set_setting(s, g.setting, g.value);
    }
  }
};

CLI::App* add_step(CLI::App& app, StepArgs& st, StepFlags& flags) {
  auto* step = app.add_subcommand(
      "step",
      "Apply a run file's gradient to a table: one optimizer step (torch.optim's SGD, Adagrad, Adam/AdamW, "
      "or row-wise Adagrad), its state kept in a state file");
  step->add_option("--table", st.table, "Table file the run's gradient was computed on")->required();
  step->add_option("--run", st.run, "Run file (kembed backward): a dense or row-sparse gradient")->required();
  step->add_option("--out", st.out, "Table file to write: the table after the step")->required();
  step->add_option("--state", st.state, "The optimizer's state after the last step (default: a first step)");
  step->add_option("--state-out", st.state_out, "State file to write (default: OUT.state)");
  add_setting(step, "--optimizer", st.optimizer, kembed::parse_optimizer,
              "sgd, adagrad, rowwise_adagrad or adam (default: the state's; needed for a first step)");
  auto number = [&](char const* flag, char const* setting, char const* help) {
    step->add_option_function<double>(
        flag,
        [&flags, flag, setting](double x) {
          flags.given.push_back({setting, flag, x});
        },
        help);
  };
  auto flag = [&](char const* name, char const* setting, char const* help) {
    step->add_flag_callback(
        name,
        [&flags, name, setting] {
          flags.given.push_back({setting, name, 1.0});
        },
        help);
  };
  number("--lr", "lr", "Learning rate (default: the state's, or torch's for the optimizer)");
  number("--weight-decay", "weight_decay", "L2 penalty (AdamW: decoupled, with --decoupled-weight-decay)");
  number("--momentum", "momentum", "SGD's momentum");
  number("--dampening", "dampening", "SGD's dampening");
  flag("--nesterov", "nesterov", "SGD's Nesterov momentum");
  number("--lr-decay", "lr_decay", "Adagrad's learning rate decay");
  number("--initial-accumulator-value", "initial_accumulator_value",
         "Adagrad's (and row-wise Adagrad's) starting sum, for a first step");
  number("--eps", "eps", "Added to the denominator (Adagrad, row-wise Adagrad, Adam)");
  step->add_option_function<std::vector<double>>(
          "--betas",
          [&flags](std::vector<double> const& b) {
            flags.given.push_back({"beta1", "--betas", b[0]});
            flags.given.push_back({"beta2", "--betas", b[1]});
          },
          "Adam's two betas")
      ->expected(2);
  flag("--decoupled-weight-decay", "decoupled_weight_decay", "Adam with decoupled weight decay: AdamW");
  flag("--maximize", "maximize", "Step up the gradient instead of down");
  step->add_flag("--deflate", st.deflate, "Compress the table and state files (shuffle + deflate)");
  return step;
}

// Runs a command, turning what it throws into a message and an exit status.
template <class F>
int reporting_errors(Console& console, F&& command) {
  try {
    return command();
  } catch (kembed::io::IoFailure const& e) {
    console.error(e.message());
    return Exit::io_failure;
  } catch (kembed::Error const& e) {
    console.error(e.message());
    return Exit::bad_input;
  } catch (std::bad_alloc const&) {
    console.error("out of memory");
    return Exit::io_failure;
  } catch (std::exception const& e) {
    console.error(std::string("internal error: ") + e.what());
    return Exit::internal;
  }
}

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_waiting(argc, argv);
  kembed::io::set_up_batch_process();  // a file-size limit is an I/O failure (exit 3), not a kill
  CLI::App app{
      "kembed: reproducible embedding tables. Exit status: 0 success, 1 differ (diff), 2 bad input, "
      "3 I/O failure, 4 internal error.",
      "kembed"};
  app.require_subcommand(1);
  app.fallthrough();  // --quiet, --backend, --threads also after the subcommand
  bool quiet = false;
  std::string backend = "default";
  std::optional<int> threads;
  app.add_flag("-q,--quiet", quiet, "No progress or log lines on stderr (errors still)");
  app.add_option("--backend", backend,
                 "Kokkos backend: " + backend_list() + " (default: Kokkos' default, " +
                     std::string(Kokkos::DefaultExecutionSpace::name()) + ")");
  app.add_option("--threads", threads,
                 "Threads for the OpenMP backend, 1 to 512 (default: OMP_NUM_THREADS or all cores)");
  app.set_version_flag("--version", std::string(KEMBED_VERSION_STRING));

  BackwardArgs bw;
  ForwardArgs fw;
  DiffArgs df;
  std::string info_path;
  bool info_check = false;
  MakeBatchArgs mb;
  MakeTableArgs mt;
  ImportArgs im;
  StepArgs st;
  StepFlags step_flags;
  auto* const backward = add_backward(app, bw);
  auto* const forward = add_forward(app, fw);
  auto* const diff_cmd = add_diff(app, df);
  auto* const info_cmd = add_info(app, info_path, info_check);
  auto* const make_batch_cmd = add_make_batch(app, mb);
  auto* const make_table_cmd = add_make_table(app, mt);
  auto* const import_cmd = add_import(app, im);
  auto* const step_cmd = add_step(app, st, step_flags);
  st.adjust = [&step_flags](kembed::OptimSettings& s) { step_flags.apply(s); };
  try {
    app.parse(argc, argv);
  } catch (CLI::ParseError const& e) {
    int const code = app.exit(e);  // prints help or the parse error
    return code == 0 ? Exit::ok : Exit::bad_input;
  } catch (kembed::Error const& e) {  // a setting's value (add_setting)
    Console::get().error(e.message());
    return Exit::bad_input;
  }
  auto& console = Console::get();
  console.set_quiet(quiet);
  bw.command_line.assign(argv, argv + argc);
  std::optional<MpiSession> mpi;  // outlives Kokkos, which starts inside on_backend
  return reporting_errors(console, [&] {
    if (launched_as_rank()) start_ranks(bool(*backward) || bool(*forward) || bool(*step_cmd), mpi);
    if (*backward)
      return on_backend(backend, threads, [&](auto space) { return kembed::cli::backward<decltype(space)>(bw); });
    if (*forward)
      return on_backend(backend, threads, [&](auto space) { return kembed::cli::forward<decltype(space)>(fw); });
    if (*step_cmd)
      return on_backend(backend, threads, [&](auto space) { return kembed::cli::step<decltype(space)>(st); });
    if (*diff_cmd) return diff(df);
    if (*info_cmd) return info(info_path, info_check);
    if (*make_batch_cmd) return make_batch(mb);
    if (*make_table_cmd) return make_table(mt);
    if (*import_cmd) return import_table(im);
    return int(Exit::internal);
  });
}
