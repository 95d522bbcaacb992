// Checkpoints: digests over everything a resume builds on.
#include "io_fixture.hpp"

namespace kembed {
namespace {

// Every attribute a resume builds on is covered by checkpoint_sha256 (each edited in
// turn is refused, also when only the attributes are read), the data by their own
// digests (checked when every row is read; a rank reading part of them leaves that
// to its job), and a checkpoint without the digest is not resumed.
// The inputs' fingerprint kind travels with the checkpoint, under its digest: a
// checkpoint of chunk fingerprints read as whole-file ones would never match.
TEST_F(Io, ACheckpointKeepsItsKindOfInputFingerprint) {
  auto c = sample_checkpoint();
  c.fingerprint = io::Fingerprint::chunks;
  io::write_checkpoint(path("c.h5"), c);
  EXPECT_EQ(io::read_checkpoint(path("c.h5")).fingerprint, io::Fingerprint::chunks);
  EXPECT_EQ(io::read_checkpoint(path("c.h5"), false).fingerprint, io::Fingerprint::chunks);
  c.fingerprint = io::Fingerprint::file;  // as files before the kind: no attribute at all
  io::write_checkpoint(path("f.h5"), c);
  EXPECT_EQ(io::read_checkpoint(path("f.h5")).fingerprint, io::Fingerprint::file);
  hid_t f = H5Fopen(path("f.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_EQ(H5Aexists(f, "inputs_fingerprint"), 0);
  H5Fclose(f);
  fs::copy_file(path("c.h5"), path("edited.h5"));
  f = H5Fopen(path("edited.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(f, "inputs_fingerprint");
  H5Fclose(f);
  EXPECT_NE(refusal([&] { io::read_checkpoint(path("edited.h5")); }).find("do not match checkpoint_sha256"),
            std::string::npos);
  fs::copy_file(path("c.h5"), path("bad.h5"));
  f = H5Fopen(path("bad.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  set_string_attr(f, "inputs_fingerprint", "sha1");
  H5Fclose(f);
  EXPECT_NE(refusal([&] {
              io::read_checkpoint(path("bad.h5"));
            }).find("attribute inputs_fingerprint must be chunks or file, got 'sha1'; the checkpoint is damaged"),
            std::string::npos);
}

TEST_F(Io, CheckpointsCarryDigestsOverEverythingAResumeUses) {
  auto const c = sample_checkpoint();
  io::write_checkpoint(path("c.h5"), c);
  auto const back = io::read_checkpoint(path("c.h5"));
  EXPECT_EQ(back.gradient_sha256, io::sha256_hex(c.gradient.data(), c.gradient.size() * 4));
  EXPECT_EQ(back.counts_sha256, io::counts_sha256(c.counts.data(), c.rows));
  EXPECT_EQ(back.checkpoint_sha256, io::checkpoint_sha256(back));
  EXPECT_EQ(back.elapsed_seconds, c.elapsed_seconds);
  std::pair<char const*, std::function<void(hid_t)>> const edits[] = {
      {"position", [](hid_t f) { set_int_attr(f, "position", 1); }},
      {"microbatches", [](hid_t f) { set_int_attr(f, "microbatches", 4); }},
      {"microbatch_size", [](hid_t f) { set_int_attr(f, "microbatch_size", 7); }},
      {"padding_idx", [](hid_t f) { set_int_attr(f, "padding_idx", 5); }},
      {"job_id", [](hid_t f) { set_string_attr(f, "job_id", "job-2"); }},
      {"batch_sha256", [](hid_t f) { set_string_attr(f, "batch_sha256", std::string(64, 'c').c_str()); }},
      {"plan", [](hid_t f) { set_string_attr(f, "plan", "scan"); }},
      {"numeric_mode", [](hid_t f) { set_string_attr(f, "numeric_mode", "fast"); }},
      {"scale_grad_by_freq", [](hid_t f) { set_string_attr(f, "scale_grad_by_freq", "call"); }},
      {"counts_sha256", [](hid_t f) { set_string_attr(f, "counts_sha256", std::string(64, '0').c_str()); }},
  };
  for (auto const& [what, edit] : edits) {
    fs::copy_file(path("c.h5"), path("edited.h5"), fs::copy_options::overwrite_existing);
    hid_t f = H5Fopen(path("edited.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    edit(f);
    H5Fclose(f);
    for (bool data : {false, true})
      EXPECT_NE(refusal([&] { io::read_checkpoint(path("edited.h5"), data); }).find("do not match checkpoint_sha256"),
                std::string::npos)
          << what << (data ? " (with data)" : " (attributes)");
  }
  // The data: caught when every row is read, not by a rank reading its part.
  auto g = c.gradient;
  g[3 * c.cols] = 2 * g[3 * c.cols];
  fs::copy_file(path("c.h5"), path("grad.h5"), fs::copy_options::overwrite_existing);
  overwrite(path("grad.h5"), "gradient", H5T_NATIVE_FLOAT, g);
  EXPECT_NE(refusal([&] { io::read_checkpoint(path("grad.h5")); }).find("'/gradient': does not match its SHA-256"),
            std::string::npos);
  EXPECT_EQ(refusal([&] { io::read_checkpoint(path("grad.h5"), true, 0, c.rows - 1); }), "(read)");
  auto n = c.counts;
  n[7] = -3;
  fs::copy_file(path("c.h5"), path("counts.h5"), fs::copy_options::overwrite_existing);
  overwrite(path("counts.h5"), "counts", H5T_NATIVE_INT64, n);
  EXPECT_NE(refusal([&] { io::read_checkpoint(path("counts.h5")); }).find("'/counts': does not match its SHA-256"),
            std::string::npos);
  // No digest: described and identified, never resumed.
  fs::copy_file(path("c.h5"), path("old.h5"), fs::copy_options::overwrite_existing);
  hid_t f = H5Fopen(path("old.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(f, "checkpoint_sha256");
  H5Fclose(f);
  EXPECT_EQ(io::read_checkpoint(path("old.h5"), false).job_id, "job-1");
  EXPECT_NE(refusal([&] { io::read_checkpoint(path("old.h5")); }).find("has no checkpoint_sha256"), std::string::npos);
}

}  // namespace
}  // namespace kembed
