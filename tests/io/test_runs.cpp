// Run files: round trips, settings read back typed, digests over the gradient,
// counts and summary, and sparse runs read as their dense gradient.
#include "io_fixture.hpp"

namespace kembed {
namespace {

// padding_idx in run files and checkpoints: written only normalised (a row in
// [0, V) or -1 for none), and a file holding anything else is refused when read.
TEST_F(Io, PaddingRowsAreStoredNormalisedAndNothingElseIsRead) {
  auto run = sample_run();
  io::Checkpoint ckpt;
  ckpt.rows = run.rows, ckpt.cols = run.cols, ckpt.gradient = run.gradient, ckpt.counts = run.counts;
  ckpt.plan = Plan::automatic, ckpt.numeric_mode = Mode::identical, ckpt.microbatch_size = 7;
  for (std::int64_t bad : {std::int64_t{-2}, -run.rows, run.rows}) {
    run.padding_idx = ckpt.padding_idx = bad;
    EXPECT_THROW(io::write_run(path("bad.h5"), run), InvalidArgument) << bad;
    EXPECT_THROW(io::write_checkpoint(path("bad.ckpt"), ckpt), InvalidArgument) << bad;
    EXPECT_FALSE(fs::exists(path("bad.h5")) || fs::exists(path("bad.ckpt"))) << "nothing written for " << bad;
  }
  for (std::int64_t good : {std::int64_t{-1}, std::int64_t{0}, run.rows - 1}) {
    run.padding_idx = ckpt.padding_idx = good;
    io::write_run(path("good.h5"), run);
    io::write_checkpoint(path("good.ckpt"), ckpt);
    EXPECT_EQ(io::read_run(path("good.h5")).padding_idx, good);
    EXPECT_EQ(io::read_checkpoint(path("good.ckpt")).padding_idx, good);
  }
  for (auto const& file : {path("good.h5"), path("good.ckpt")}) {
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    set_int_attr(f, "padding_idx", -2);
    H5Fclose(f);
    try {
      if (file.find(".ckpt") != std::string::npos)
        io::read_checkpoint(file);
      else
        io::read_run(file);
      ADD_FAILURE() << file << " with padding_idx -2 was read";
    } catch (io::FileError const& e) {
      EXPECT_NE(std::string(e.what()).find("its padding_idx is -2, but a kembed file stores the padding row as a row "
                                           "number in [0, " +
                                           std::to_string(run.rows) + ") or -1 for none"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(Io, RunFilesRoundTripBitForBit) {
  auto const run = sample_run();
  io::SaveOptions so;
  so.deflate = true;
  io::write_run(path("run.h5"), run, so);
  auto const back = io::read_run(path("run.h5"));
  EXPECT_TRUE(same_bits(back.gradient, run.gradient));
  EXPECT_EQ(back.counts, run.counts);
  EXPECT_EQ(back.gradient_sha256, io::sha256_hex(run.gradient.data(), run.gradient.size() * 4));
  EXPECT_EQ(io::read_run_gradient_sha256(path("run.h5")), back.gradient_sha256);
  EXPECT_EQ(back.run_id, run.run_id);
  EXPECT_EQ(back.backend, run.backend);
  EXPECT_EQ(back.threads, run.threads);
  EXPECT_EQ(back.plan, run.plan);
  EXPECT_EQ(back.plan_used, run.plan_used);
  EXPECT_EQ(back.numeric_mode, run.numeric_mode);
  EXPECT_EQ(back.padding_idx, run.padding_idx);
  EXPECT_EQ(back.positions, run.positions);
  EXPECT_EQ(back.microbatches, run.microbatches);
  EXPECT_EQ(back.microbatch_size, run.microbatch_size);
  ASSERT_EQ(back.inputs.size(), 2u);
  EXPECT_EQ(back.inputs[0].role, "table");  // creation order, not alphabetical
  EXPECT_EQ(back.inputs[1].path, "batch.h5");
  EXPECT_EQ(back.inputs[1].sha256, run.inputs[1].sha256);
  EXPECT_EQ(back.inputs[1].bytes, 2000);
  EXPECT_EQ(back.inputs[1].fingerprint, run.inputs[1].fingerprint);
  // Each kind under its own attribute: sha256 is always sha256sum's whole-file digest.
  hid_t f = H5Fopen(path("run.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GT(H5Aexists_by_name(f, "/inputs/table", "sha256", H5P_DEFAULT), 0);
  EXPECT_GT(H5Aexists_by_name(f, "/inputs/batch", "sha256_of_16MiB_chunks", H5P_DEFAULT), 0);
  EXPECT_EQ(H5Aexists_by_name(f, "/inputs/batch", "sha256", H5P_DEFAULT), 0);
  H5Fclose(f);
  EXPECT_EQ(back.timings, run.timings);
  EXPECT_EQ(back.command_line_json, "[\"kembed\", \"backward\", \"--table\", \"a \\\"b\\\"\\n\"]");
  EXPECT_EQ(back.configuration_json, run.configuration_json);
  EXPECT_FALSE(back.created.empty());
  EXPECT_EQ(io::file_format(path("run.h5")), "kembed-run-1");
  EXPECT_THROW(io::load_table(path("run.h5")), io::FileError);
}

// Issue 39: a run of many ranks records each rank's share (/rank_work), read back as
// written; one process's run has none; a list that is not one value per rank is
// refused by name, as damage.
TEST_F(Io, RunFilesRecordEachRanksShareOfTheWork) {
  auto run = sample_run();
  io::write_run(path("one.h5"), run);
  EXPECT_TRUE(io::read_run_header(path("one.h5")).rank_work.empty());
  run.ranks = 3;
  run.rank_work = {{900, 10, 2500}, {70, 4000, 300}, {30, 4100, 200}};
  io::write_run(path("three.h5"), run);
  EXPECT_EQ(io::read_run_header(path("three.h5")).rank_work, run.rank_work);
  EXPECT_EQ(io::read_run(path("three.h5")).rank_work, run.rank_work);
  auto const info = io::info_text(io::file_info(path("three.h5")));
  EXPECT_NE(info.find("rank 0 folds 90.0 % of the 1,000 terms, 2.70x the mean of 3 ranks"), std::string::npos) << info;
  EXPECT_NE(info.find("1     70 terms (7.0 %), 0.3 ms folding, 4,000 bytes sent"), std::string::npos) << info;
  // A file that says 4 ranks but lists 3.
  hid_t f = H5Fopen(path("three.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t a = H5Aopen(f, "ranks", H5P_DEFAULT);
  std::int64_t const four = 4;
  H5Awrite(a, H5T_NATIVE_INT64, &four);
  H5Aclose(a);
  H5Fclose(f);
  try {
    io::read_run_header(path("three.h5"));
    ADD_FAILURE() << "a list of 3 for 4 ranks was read";
  } catch (io::FileError const& e) {
    EXPECT_NE(std::string(e.what()).find("/rank_work/terms"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("holds 3 values for a run of 4 ranks"), std::string::npos) << e.what();
  }
}

// A run's settings are typed: io writes their text and reads it back, and text
// kembed never writes is damage, refused when the file is read.
TEST_F(Io, RunSettingsReadBackTypedAndRefuseUnknownText) {
  auto run = sample_run();
  run.plan = Plan::bucket;
  run.numeric_mode = Mode::deterministic;
  run.scale_grad_by_freq = FreqScale::batch;
  io::write_run(path("run.h5"), run);
  auto const settings = io::settings_of(io::read_run_header(path("run.h5")));
  EXPECT_EQ(settings.mode, Mode::deterministic);
  EXPECT_EQ(settings.plan, Plan::bucket);
  EXPECT_EQ(settings.scale_grad_by_freq, FreqScale::batch);
  EXPECT_EQ(settings.padding_idx, run.padding_idx);
  for (auto [attribute, text] :
       {std::pair{"numeric_mode", "exact"}, std::pair{"plan", "fastest"}, std::pair{"scale_grad_by_freq", "always"}}) {
    SCOPED_TRACE(attribute);
    hid_t f = H5Fopen(path("run.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    set_string_attr(f, attribute, text);
    H5Fclose(f);
    EXPECT_NE(refusal([&] {
                io::read_run_header(path("run.h5"));
              }).find("attribute '" + std::string(attribute) + "' holds '" + text + "', which kembed never writes"),
              std::string::npos);
    io::write_run(path("run.h5"), run);
  }
}

TEST_F(Io, ATamperedGradientIsCaughtByItsSha256) {
  io::write_run(path("run.h5"), sample_run());
  hid_t f = H5Fopen(path("run.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "gradient", H5P_DEFAULT);
  auto g = sample_run().gradient;
  g[100] = 0.5f;  // a valid write through HDF5: the Fletcher32 checksums agree, the SHA-256 does not
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, g.data());
  H5Dclose(d), H5Fclose(f);
  try {
    io::read_run(path("run.h5"));
    ADD_FAILURE() << "a changed gradient was accepted";
  } catch (io::FileError const& e) {
    EXPECT_NE(std::string(e.what()).find("does not match its SHA-256"), std::string::npos) << e.what();
  }
}

// The gradient's summary (/summary): each level against folding its blocks' rows
// by hand, bit for bit; the same bits whatever order and pieces the rows came in.
// A sparse run file: read back as its dense gradient and counts (what a dense run
// of the same gradient holds), rows by RowReader as from the dense file, the same
// summary as the dense file's, its digest over the listed records checked; bad
// slabs are refused before anything is written, a changed value is caught.
TEST_F(Io, SparseRunFilesReadAsTheirDenseGradient) {
  auto dense = sample_run();
  std::int64_t const v = dense.rows, d = dense.cols;
  // List every 7th row and row 299 (the last block partly listed); unlisted rows +0.0.
  std::vector<std::int64_t> rows, counts;
  std::vector<float> values;
  for (std::int64_t r = 0; r < v; ++r) {
    bool const listed = r % 7 == 3 || r == v - 1;
    if (!listed) {
      std::fill_n(dense.gradient.begin() + r * d, d, 0.0f);
      dense.counts[std::size_t(r)] = 0;
      continue;
    }
    rows.push_back(r);
    counts.push_back(dense.counts[std::size_t(r)]);
    values.insert(values.end(), dense.gradient.begin() + r * d, dense.gradient.begin() + (r + 1) * d);
  }
  std::int64_t const n = std::int64_t(rows.size());
  dense.positions = std::accumulate(dense.counts.begin(), dense.counts.end(), std::int64_t{0});
  io::write_run(path("dense.h5"), dense);
  auto run = dense;
  run.gradient_sha256 = io::sparse_gradient_sha256(rows.data(), values.data(), n, d);
  io::SparseSlab const slab{0, n, n, 0, v, rows.data(), values.data(), counts.data()};
  io::write_sparse_run(path("sparse.h5"), run, slab);
  EXPECT_EQ(io::file_format(path("sparse.h5")), io::sparse_run_format);
  auto const back = io::read_run(path("sparse.h5"));
  EXPECT_TRUE(back.sparse);
  EXPECT_EQ(back.listed_rows, rows);
  EXPECT_TRUE(same_bits(back.gradient, dense.gradient));
  EXPECT_EQ(back.counts, dense.counts);
  EXPECT_EQ(back.gradient_sha256, run.gradient_sha256);
  EXPECT_EQ(io::read_run_gradient_sha256(path("sparse.h5")), run.gradient_sha256);
  EXPECT_EQ(back.numeric_mode, dense.numeric_mode);
  EXPECT_EQ(back.inputs.size(), dense.inputs.size());
  {  // Rows by hyperslab, any range, as from the dense file (the readers close after).
    io::RowReader sparse_rows(path("sparse.h5")), dense_rows(path("dense.h5"));
    EXPECT_EQ(sparse_rows.rows(), v);
    EXPECT_EQ(sparse_rows.listed_rows(), rows);
    EXPECT_TRUE(dense_rows.listed_rows().empty());
    std::pair<std::int64_t, std::int64_t> const ranges[] = {{0, v}, {0, 3}, {3, 1}, {4, 6}, {250, 50}, {299, 1}};
    for (auto const& [first, count] : ranges) {
      std::vector<float> a(std::size_t(count * d)), b(a.size());
      sparse_rows.read(first, count, a.data());
      dense_rows.read(first, count, b.data());
      EXPECT_TRUE(same_bits(a, b)) << first << ", " << count;
    }
  }
  // The same summary, level for level, as the dense file's.
  auto const sa = io::read_summary(path("sparse.h5")), sb = io::read_summary(path("dense.h5"));
  ASSERT_EQ(sa.levels.size(), sb.levels.size());
  for (std::size_t l = 0; l < sa.levels.size(); ++l) {
    EXPECT_EQ(sa.levels[l].counts, sb.levels[l].counts) << l;
    EXPECT_TRUE(same_bits(sa.levels[l].min, sb.levels[l].min)) << l;
    EXPECT_TRUE(same_bits(sa.levels[l].max, sb.levels[l].max)) << l;
    EXPECT_TRUE(same_bits(sa.levels[l].max_abs, sb.levels[l].max_abs)) << l;
  }
  // A sparse checkpoint: each reader gets the listed rows within its row range.
  io::Checkpoint ckpt;
  ckpt.job_id = "sparse", ckpt.position = 10, ckpt.microbatches = 1, ckpt.microbatch_size = 10;
  ckpt.table_sha256 = ckpt.batch_sha256 = std::string(64, '0');
  ckpt.plan = Plan::automatic, ckpt.numeric_mode = Mode::identical, ckpt.rows = v, ckpt.cols = d;
  io::write_checkpoint(path("sparse.ckpt"), ckpt, slab);
  std::pair<std::int64_t, std::int64_t> const ranges[] = {{0, v}, {100, 150}, {4, 2}};  // nvcc: no braced list here
  for (auto const& [first, count] : ranges) {
    auto const part = io::read_checkpoint(path("sparse.ckpt"), true, first, count);
    EXPECT_TRUE(part.sparse);
    std::vector<std::int64_t> want_rows;
    std::vector<float> want_values;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (rows[i] >= first && rows[i] < first + count) {
        want_rows.push_back(rows[i]);
        want_values.insert(want_values.end(), values.begin() + std::int64_t(i) * d,
                           values.begin() + std::int64_t(i + 1) * d);
      }
    EXPECT_EQ(part.listed_rows, want_rows) << first;
    EXPECT_TRUE(same_bits(part.gradient, want_values)) << first;
    EXPECT_EQ(part.counts.size(), want_rows.size());
  }
  {
    auto const attributes = io::read_checkpoint(path("sparse.ckpt"), false);
    EXPECT_TRUE(attributes.sparse) << "a sparse checkpoint says so by its attributes";
    EXPECT_EQ(attributes.listed_count, n);
    EXPECT_TRUE(attributes.listed_rows.empty() && attributes.gradient.empty()) << "attributes only: no rows read";
  }

  // Refused: rows not ascending, a wrong digest length; nothing written.
  auto bad_rows = rows;
  std::swap(bad_rows[0], bad_rows[1]);
  io::SparseSlab const bad{0, n, n, 0, v, bad_rows.data(), values.data(), counts.data()};
  EXPECT_THROW(io::write_sparse_run(path("bad.h5"), run, bad), InvalidArgument);
  EXPECT_FALSE(fs::exists(path("bad.h5")));
  // A changed value no longer matches the digest.
  {
    hid_t f = H5Fopen(path("sparse.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Dopen2(f, "gradient", H5P_DEFAULT);
    std::vector<float> stored(std::size_t(n * d));
    H5Dread(g, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, stored.data());
    stored[5] = test::from_bits(test::bits_of(stored[5]) ^ 1u);  // one bit
    H5Dwrite(g, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, stored.data());
    H5Dclose(g);
    H5Fclose(f);
  }
  try {
    io::read_run(path("sparse.h5"));
    ADD_FAILURE() << "a changed sparse gradient was read";
  } catch (io::FileError const& e) {
    EXPECT_NE(std::string(e.what()).find("does not match its SHA-256"), std::string::npos) << e.what();
  }
}

// A run's counts: every reader checks them (digest, range, sum) before anything uses
// them; the writer refuses counts no reader would take; the header alone reads none.
TEST_F(Io, RunCountsAreCheckedByEveryReader) {
  auto run = sample_run();
  auto bad = run;
  bad.positions += 1;
  EXPECT_THROW(io::write_run(path("bad.h5"), bad), InvalidArgument);
  bad = run;
  bad.counts[0] = -1, bad.counts[1] += 1;
  EXPECT_THROW(io::write_run(path("bad.h5"), bad), InvalidArgument);
  EXPECT_FALSE(fs::exists(path("bad.h5")));
  io::write_run(path("r.h5"), run);
  EXPECT_EQ(io::read_run(path("r.h5"), false).counts_sha256, io::counts_sha256(run.counts.data(), run.rows));
  auto const edit = [&](std::vector<std::int64_t> counts, bool redigest) {
    fs::copy_file(path("r.h5"), path("e.h5"), fs::copy_options::overwrite_existing);
    overwrite(path("e.h5"), "counts", H5T_NATIVE_INT64, counts);
    if (redigest) {
      hid_t f = H5Fopen(path("e.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      set_string_attr(f, "counts_sha256", io::counts_sha256(counts.data(), std::int64_t(counts.size())).c_str());
      H5Fclose(f);
    }
    return refusal([&] { io::read_run(path("e.h5"), false, false); });
  };
  auto c = run.counts;
  c[0] = -3;
  EXPECT_NE(edit(c, false).find("holds -3 at entry 0"), std::string::npos);
  c = run.counts;
  c[4] = 0;
  EXPECT_NE(edit(c, false).find("'/counts'"), std::string::npos);
  c = run.counts;
  c[0] += 1;
  EXPECT_NE(edit(c, true).find("sums to more than positions"), std::string::npos) << "digest recomputed";
  c = run.counts;
  c[0] = run.positions, std::fill(c.begin() + 1, c.end(), 0);
  EXPECT_EQ(edit(c, true), "(read)") << "one row holding every position is a run";
  c[0] = INT64_MAX;
  EXPECT_NE(edit(c, true).find("a count is in [0, positions"), std::string::npos);
  EXPECT_EQ(io::read_run_header(path("e.h5")).positions, run.positions) << "the header reads no counts";
}

// The summary: its digest is checked by read_summary, and so are its block counts
// against the run's positions; check_file also recomputes it from the rows.
TEST_F(Io, RunSummariesAreCoveredByTheirDigestAndTheRows) {
  auto const run = sample_run();
  io::write_run(path("r.h5"), run);
  auto summary = io::read_summary(path("r.h5"));
  EXPECT_TRUE(summary.verified);
  auto const report = io::check_file(path("r.h5"));
  EXPECT_TRUE(report.unverified.empty());
  EXPECT_EQ(report.verified.size(), 5u);  // chunks, gradient, counts (range and sum), counts_sha256, summary
  auto const level = "summary/rows_" + std::to_string(summary.levels[0].block_rows) + "/max";
  auto scaled = summary.levels[0].max;
  for (auto& x : scaled) x *= 1000;
  fs::copy_file(path("r.h5"), path("s.h5"));
  overwrite(path("s.h5"), level.c_str(), H5T_NATIVE_FLOAT, scaled);
  EXPECT_NE(refusal([&] { io::read_summary(path("s.h5")); }).find("'/summary': does not match its SHA-256"),
            std::string::npos);
  EXPECT_NE(refusal([&] { io::check_file(path("s.h5")); }).find("/summary"), std::string::npos);
  summary.levels[0].max = scaled;  // the digest recomputed: read_summary takes it, the rows do not
  hid_t f = H5Fopen(path("s.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  set_string_attr(f, "summary_sha256", io::summary_sha256(summary).c_str());
  H5Fclose(f);
  EXPECT_FALSE(io::read_summary(path("s.h5")).empty());
  EXPECT_NE(refusal([&] { io::check_file(path("s.h5")); }).find("is not the summary of this gradient"),
            std::string::npos);
  EXPECT_NE(refusal([&] {
              io::check_run_summary(path("s.h5"), io::read_run(path("s.h5")));
            }).find("is not the summary of this gradient"),
            std::string::npos);
  fs::copy_file(path("r.h5"), path("p.h5"));
  f = H5Fopen(path("p.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  set_int_attr(f, "positions", run.positions - 1);
  H5Fclose(f);
  EXPECT_NE(refusal([&] { io::read_summary(path("p.h5")); }).find("the summary is not this run's"), std::string::npos);
}

TEST(Summary, LevelsAreExactAndIndependentOfTheOrderRowsCameIn) {
  std::int64_t const rows = 70007, cols = 5;  // 70007 rows: blocks of 32, the last holding 23
  auto g = synthetic::uniform_floats(rows * cols, 41);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) counts[std::size_t(r)] = r % 7;
  for (std::int64_t r = 0; r < 32; ++r) g[std::size_t(r * cols)] = r == 1 ? -0.0f : 0.0f;  // block 0, column 0: zeros
  g[7] = std::numeric_limits<float>::infinity();
  for (std::int64_t r = 32; r < 64; ++r) g[std::size_t(r * cols + 1)] = std::nanf("");  // a block of NaN
  g[std::size_t(20 * cols + 2)] = std::nanf("");                                        // NaN beside numbers: left out
  io::SummaryBuilder whole(rows, cols);
  whole.add(0, rows, g.data(), counts.data());
  auto const s = whole.finish();
  ASSERT_EQ(io::summary_finest_block_rows(rows), 32);
  ASSERT_EQ(s.levels.front().blocks, 2188);
  ASSERT_EQ(s.levels.back().blocks, 1);
  ASSERT_EQ(s.levels.size(), 13u);  // 32, 64, ..., 131072 rows per block
  EXPECT_EQ(io::summary_finest_block_rows(1), 16) << "small gradients: blocks of 16 rows at the least";
  EXPECT_EQ(io::summary_finest_block_rows(65536), 16);
  EXPECT_EQ(io::summary_finest_block_rows(65537), 32);
  auto bits = [](float x) { return test::bits_of(x); };
  for (auto const& level : s.levels) {
    SCOPED_TRACE(level.block_rows);
    for (std::int64_t b = 0; b < level.blocks; ++b) {
      std::int64_t sum = 0;
      for (std::int64_t r = b * level.block_rows; r < std::min(rows, (b + 1) * level.block_rows); ++r)
        sum += counts[std::size_t(r)];
      ASSERT_EQ(level.counts[std::size_t(b)], sum);
      for (std::int64_t c = 0; c < cols; ++c) {
        float lo = 0, hi = 0, top = 0;
        bool any = false;
        for (std::int64_t r = b * level.block_rows; r < std::min(rows, (b + 1) * level.block_rows); ++r) {
          float const x = g[std::size_t(r * cols + c)];
          if (std::isnan(x)) continue;
          if (!any || x < lo || (x == lo && std::signbit(x))) lo = x;
          if (!any || x > hi || (x == hi && !std::signbit(x))) hi = x;
          if (!any || std::fabs(x) > top) top = std::fabs(x);
          any = true;
        }
        auto const i = std::size_t(b * cols + c);
        if (!any) {
          ASSERT_TRUE(std::isnan(level.min[i]) && std::isnan(level.max[i]) && std::isnan(level.max_abs[i]));
          continue;
        }
        ASSERT_EQ(bits(level.min[i]), bits(lo)) << "block " << b << " column " << c;
        ASSERT_EQ(bits(level.max[i]), bits(hi)) << "block " << b << " column " << c;
        ASSERT_EQ(bits(level.max_abs[i]), bits(top)) << "block " << b << " column " << c;
      }
    }
  }
  EXPECT_EQ(bits(s.levels.front().min[0]), bits(-0.0f));
  EXPECT_EQ(bits(s.levels.front().max[0]), bits(0.0f));
  // Rows in reverse pieces of 3, and split over two builders merged: the same bits.
  io::SummaryBuilder reversed(rows, cols), other(rows, cols);
  for (std::int64_t first = rows; first > 0; first -= 3) {
    std::int64_t const from = std::max<std::int64_t>(0, first - 3);
    (from % 2 ? reversed : other).add(from, first - from, g.data() + from * cols, counts.data() + from);
  }
  reversed.merge(other);
  auto const again = reversed.finish();
  ASSERT_EQ(again.levels.size(), s.levels.size());
  for (std::size_t k = 0; k < s.levels.size(); ++k) {
    auto const& x = s.levels[k];
    auto const& y = again.levels[k];
    EXPECT_EQ(x.counts, y.counts);
    EXPECT_EQ(std::memcmp(x.min.data(), y.min.data(), x.min.size() * 4), 0);
    EXPECT_EQ(std::memcmp(x.max.data(), y.max.data(), x.max.size() * 4), 0);
    EXPECT_EQ(std::memcmp(x.max_abs.data(), y.max_abs.data(), x.max_abs.size() * 4), 0);
  }
}

// write_run stores the summary and read_summary gives it back bit for bit; a file
// without one (as runs before it) reads as empty, and a damaged one is refused.
TEST_F(Io, RunFilesCarryTheirGradientsSummary) {
  io::RunFile run;
  run.rows = 300, run.cols = 3;
  run.gradient = synthetic::uniform_floats(run.rows * run.cols, 3);
  run.counts.assign(std::size_t(run.rows), 2);
  run.positions = 2 * run.rows;
  run.run_id = "summary";
  io::write_run(path("r.h5"), run);
  io::SummaryBuilder b(run.rows, run.cols);
  b.add(0, run.rows, run.gradient.data(), run.counts.data());
  auto const want = b.finish();
  auto const got = io::read_summary(path("r.h5"));
  ASSERT_EQ(got.levels.size(), want.levels.size());
  EXPECT_EQ(got.levels.front().block_rows, 16) << "300 rows: blocks of 16, the least";
  for (std::size_t k = 0; k < want.levels.size(); ++k) {
    EXPECT_EQ(got.levels[k].counts, want.levels[k].counts);
    EXPECT_EQ(
        std::memcmp(got.levels[k].max_abs.data(), want.levels[k].max_abs.data(), want.levels[k].max_abs.size() * 4), 0);
    EXPECT_EQ(std::memcmp(got.levels[k].min.data(), want.levels[k].min.data(), want.levels[k].min.size() * 4), 0);
  }
  auto remove = [&](char const* object) {  // as h5py's `del f[object]`
    hid_t f = H5Fopen(path("r.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(H5Ldelete(f, object, H5P_DEFAULT), 0);
    H5Fclose(f);
  };
  remove("/summary/rows_32/max");
  EXPECT_THROW(
      try { io::read_summary(path("r.h5")); } catch (io::FileError const& e) {
        EXPECT_NE(std::string(e.what()).find("/summary/rows_32/max"), std::string::npos) << e.what();
        throw;
      },
      io::FileError);
  {  // a hostile level list: refused by name, nothing allocated for it
    hid_t f = H5Fopen(path("r.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(H5Ldelete(f, "/summary/block_rows", H5P_DEFAULT), 0);
    hsize_t const n = hsize_t{1} << 40;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t const chunk = 1024;
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t d = H5Dcreate2(f, "/summary/block_rows", H5T_STD_I64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d), H5Pclose(dcpl), H5Sclose(space), H5Fclose(f);
  }
  EXPECT_THROW(
      try { io::read_summary(path("r.h5")); } catch (io::FileError const& e) {
        EXPECT_NE(std::string(e.what()).find("/summary/block_rows"), std::string::npos) << e.what();
        throw;
      },
      io::FileError);
  remove("/summary");  // as a run file from before the summary
  EXPECT_TRUE(io::read_summary(path("r.h5")).empty());
  EXPECT_EQ(io::read_run(path("r.h5")).gradient, run.gradient) << "the run still reads";
}

}  // namespace
}  // namespace kembed
