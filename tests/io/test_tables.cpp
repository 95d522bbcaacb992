// Table files: round trips bit for bit, every setting, partial reads, foreign datasets,
// and every bad file refused with a message that names the file, the dataset and the
// problem (one row per case).
#include "io_fixture.hpp"

namespace kembed {
namespace {

TEST_F(Io, TableRoundTripsEverySettingBitForBit) {
  std::int64_t const v = 257, d = 13;
  auto const w = special_table(v, d);
  int k = 0;
  for (auto pad : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{0}, std::optional<std::int64_t>{-1}})
    for (auto plan : {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic})
      for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
        for (bool deflate : {false, true}) {
          auto const c = config(v, d, pad, plan, mode);
          io::SaveOptions so;
          so.deflate = deflate;
          so.rows_per_chunk = deflate ? 16 : 0;
          so.created_by = "test " + std::to_string(k);
          auto const p = path("t" + std::to_string(k++) + ".h5");
          io::save_table(p, w.data(), c, so);
          auto const t = io::load_table(p);
          EXPECT_TRUE(same_bits(t.weight, w));
          EXPECT_EQ(t.config.num_embeddings, v);
          EXPECT_EQ(t.config.embedding_dim, d);
          EXPECT_EQ(t.config.padding_idx, c.padding_idx);
          EXPECT_EQ(t.config.plan, plan);
          EXPECT_EQ(t.config.mode, mode);
          EXPECT_EQ(t.created_by, so.created_by);
          EXPECT_FALSE(t.kembed_version.empty());
        }
  EXPECT_EQ(files().size(), std::size_t(k)) << "no temporary files left behind";
}

// torch's other options come back as saved; a file without them reads as before
// (and is written byte for byte as before: the attributes appear only when set).
TEST_F(Io, TableRoundTripsTorchsOtherOptions) {
  std::int64_t const v = 40, d = 3;
  auto const w = special_table(v, d);
  int k = 0;
  for (auto max_norm : {std::optional<double>{}, std::optional<double>{0.25}})
    for (double p : {2.0, 1.0, std::numeric_limits<double>::infinity(), 0.5})
      for (auto scale : {FreqScale::none, FreqScale::call, FreqScale::batch})
        for (bool sparse : {false, true}) {
          if (!max_norm && p != 2.0) continue;  // refused: norm_type needs max_norm
          Options o;
          o.max_norm = max_norm;
          o.norm_type = p;
          o.scale_grad_by_freq = scale;
          o.sparse = sparse;
          auto const c = make_config(v, d, o);
          auto const path_k = path("o" + std::to_string(k++) + ".h5");
          io::save_table(path_k, w.data(), c);
          auto const t = io::load_table(path_k);
          EXPECT_EQ(t.config.max_norm, c.max_norm);
          EXPECT_EQ(t.config.norm_type, p);
          EXPECT_EQ(t.config.scale_grad_by_freq, scale);
          EXPECT_EQ(t.config.sparse, sparse);
          EXPECT_TRUE(same_bits(t.weight, w));
        }
  auto const plain = path("plain.h5");
  io::save_table(plain, w.data(), config(v, d));
  hid_t const f = H5Fopen(plain.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  for (char const* name : {"max_norm", "norm_type", "scale_grad_by_freq", "sparse"})
    EXPECT_EQ(H5Aexists(f, name), 0) << name << " written for a table without it";
  H5Fclose(f);
}

TEST_F(Io, EmbeddingSaveAndLoad) {
  std::int64_t const v = 40, d = 6;
  auto const w = special_table(v, d);
  Options o;
  o.padding_idx = -3;
  o.mode = Mode::deterministic;
  o.plan = Plan::scan;
  Embedding<Kokkos::DefaultHostExecutionSpace> layer(v, d, FloatsRef(w.data(), Shape{v, d}), o);
  io::save(layer, path("layer.h5"));
  auto const back = io::load<Kokkos::DefaultHostExecutionSpace>(path("layer.h5"));
  EXPECT_TRUE(same_bits(back.weight_host(), w));
  EXPECT_EQ(back.padding_idx(), v - 3);
  EXPECT_EQ(back.mode(), Mode::deterministic);
  EXPECT_EQ(back.plan(), Plan::scan);
}

// torch's other options come back too (io::load once dropped them, and Python's load uses it).
TEST_F(Io, EmbeddingLoadKeepsTorchOptions) {
  std::int64_t const v = 12, d = 3;
  auto const w = special_table(v, d);
  Options o;
  o.max_norm = 1.5;
  o.norm_type = 3.0;
  o.scale_grad_by_freq = FreqScale::batch;
  o.sparse = true;
  Embedding<Kokkos::DefaultHostExecutionSpace> layer(v, d, FloatsRef(w.data(), Shape{v, d}), o);
  io::save(layer, path("options.h5"));
  auto const back = io::load<Kokkos::DefaultHostExecutionSpace>(path("options.h5"));
  EXPECT_EQ(back.config().max_norm, 1.5);
  EXPECT_EQ(back.config().norm_type, 3.0);
  EXPECT_EQ(back.config().scale_grad_by_freq, FreqScale::batch);
  EXPECT_TRUE(back.config().sparse);
}

TEST_F(Io, LoadRowsReadsARowRange) {
  std::int64_t const v = 1000, d = 7;
  auto const w = special_table(v, d);
  io::SaveOptions so;
  so.rows_per_chunk = 64;
  io::save_table(path("t.h5"), w.data(), config(v, d), so);
  // Named arrays, not braced lists, in range-for: nvcc 11.8 cannot deduce those.
  std::pair<std::int64_t, std::int64_t> const good[] = {{0, 1}, {63, 2}, {500, 300}, {999, 1}, {0, 1000}, {1000, 0}};
  for (auto [first, count] : good) {
    auto const t = io::load_rows(path("t.h5"), first, count);
    EXPECT_EQ(t.first_row, first);
    EXPECT_TRUE(same_bits(t.weight, std::vector<float>(w.begin() + first * d, w.begin() + (first + count) * d)));
  }
  std::pair<std::int64_t, std::int64_t> const bad[] = {{-1, 2}, {999, 2}, {1001, 0}, {0, -1}};
  for (auto [first, count] : bad) {
    try {
      io::load_rows(path("t.h5"), first, count);
      ADD_FAILURE() << "rows " << first << " + " << count << " accepted";
    } catch (InvalidArgument const& e) {
      EXPECT_NE(std::string(e.what()).find("are not within the table's 1000 rows"), std::string::npos) << e.what();
    }
  }
}

// ---- files as other tools write them, made with the HDF5 C API ----------------

TEST_F(Io, ForeignFloat32DatasetsLoadInEveryLayout) {
  std::int64_t const v = 33, d = 5;
  auto const w = special_table(v, d);
  std::vector<hsize_t> const dims{hsize_t(v), hsize_t(d)};
  write_dataset(path("contiguous.h5"), "/emb", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, w.data(), dims);
  write_dataset(path("chunked.h5"), "/model/layer0/emb", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, w.data(), dims, {4, 5},
                true);
  write_dataset(path("bigendian.h5"), "/emb", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, w.data(), dims, {8, 5});
  std::pair<char const*, char const*> const files[] = {
      {"contiguous.h5", "/emb"}, {"chunked.h5", "model/layer0/emb"}, {"bigendian.h5", "emb"}};
  for (auto [file, name] : files) {
    auto const t = io::read_table_dataset(path(file), name);
    EXPECT_TRUE(same_bits(t.weight, w)) << file;
    EXPECT_EQ(t.config.num_embeddings, v);
    EXPECT_FALSE(t.config.has_padding());
  }
}

TEST_F(Io, Float64AndFloat16ConvertOnlyWhenAsked) {
  std::vector<double> w64{1.0, 0.1, -2.5, 1e-3, 3.0, 1.0 / 3.0};
  write_dataset(path("f64.h5"), "/emb", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, w64.data(), {3, 2});
  // IEEE binary16 as h5py writes it: a 16-bit float type derived from float32.
  hid_t half = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(half, 15, 10, 5, 0, 10);
  H5Tset_size(half, 2);
  H5Tset_ebias(half, 15);
  std::vector<float> w16{1.0f, 0.5f, -2.0f, 0.25f};
  write_dataset(path("f16.h5"), "/emb", half, H5T_NATIVE_FLOAT, w16.data(), {2, 2});
  H5Tclose(half);
  std::pair<char const*, char const*> const files[] = {{"f64.h5", "64-bit floats"}, {"f16.h5", "16-bit floats"}};
  for (auto [file, kind] : files) {
    try {
      io::read_table_dataset(path(file), "emb");
      ADD_FAILURE() << file << " loaded without asking";
    } catch (io::FileError const& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("holds ") + kind), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("astype('float32')"), std::string::npos) << e.what();
    }
  }
  auto const t64 = io::read_table_dataset(path("f64.h5"), "emb", true);
  std::vector<float> want64;
  for (double x : w64) want64.push_back(static_cast<float>(x));
  EXPECT_TRUE(same_bits(t64.weight, want64));
  EXPECT_TRUE(same_bits(io::read_table_dataset(path("f16.h5"), "emb", true).weight, w16));
}

TEST_F(Io, EveryBadFileIsRefusedByName) {
  auto const nan_table = [](std::string const& p) {
    write_table_with(p, [](hid_t f) {
      hid_t d = H5Dopen2(f, "weight", H5P_DEFAULT);
      std::vector<float> w(60, 1.0f);
      w[3 * 7 + 2] = std::numeric_limits<float>::quiet_NaN();
      H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data());
      H5Dclose(d);
    });
  };
  std::int64_t const huge = std::int64_t{1} << 40;
  std::vector<BadFile> const rows{
      {"missing file", [](std::string const&) {}, "cannot be opened: No such file or directory"},
      {"not HDF5", [](std::string const& p) { std::ofstream(p) << "id,vector\n1,0.5\n"; },
       "is not an HDF5 file (no HDF5 signature)"},
      {"truncated file",
       [](std::string const& p) {
         auto w = synthetic::uniform_floats(20000 * 8, 1);
         io::save_table(p, w.data(), config(20000, 8));
         fs::resize_file(p, fs::file_size(p) / 2);
       },
       "is an HDF5 file but cannot be opened; it is truncated or damaged"},
      {"no format tag", [](std::string const& p) { write_table_with(p, [](hid_t f) { H5Adelete(f, "format"); }); },
       "has no 'format' attribute, so it is not a kembed table file"},
      {"wrong format tag",
       [](std::string const& p) {
         write_table_with(p, [](hid_t f) { set_string_attr(f, "format", "acme-vectors-3"); });
       },
       "has format 'acme-vectors-3', not 'kembed-embedding-1'"},
      {"newer version",
       [](std::string const& p) {
         write_table_with(p, [](hid_t f) { set_string_attr(f, "format", "kembed-embedding-2"); });
       },
       "was written by a newer kembed (format 'kembed-embedding-2'); this kembed reads 'kembed-embedding-1'"},
      {"a run file, not a table",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_string_attr(f, "format", "kembed-run-1"); }); },
       "is a kembed run file (format 'kembed-run-1'), not a table file"},
      {"missing dataset",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { H5Ldelete(f, "weight", H5P_DEFAULT); }); },
       "does not exist", "/weight"},
      {"wrong rank",
       [](std::string const& p) {
         write_table_with(p, [](hid_t f) { replace_weight(f, H5T_IEEE_F32LE, {20, 3, 1}); });
       },
       "has rank 3 (shape (20, 3, 1)); a table has rank 2", "/weight"},
      {"integer table",
       [](std::string const& p) { write_table_with(p, [](hid_t f) {
                                    replace_weight(f, H5T_STD_I32LE, {20, 3});
                                  }); },
       "holds 32-bit integers; a table holds float32 values", "/weight"},
      {"string dataset",
       [](std::string const& p) {
         write_table_with(p, [](hid_t f) {
           hid_t t = H5Tcopy(H5T_C_S1);
           H5Tset_size(t, 8);
           replace_weight(f, t, {20, 3});
           H5Tclose(t);
         });
       },
       "holds strings; a table holds float32 values", "/weight"},
      {"float64 kembed table",
       [](std::string const& p) { write_table_with(p, [](hid_t f) {
                                    replace_weight(f, H5T_IEEE_F64LE, {20, 3});
                                  }); },
       "holds 64-bit floats; kembed tables are float32", "/weight"},
      {"shape disagrees with the attributes",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_int_attr(f, "num_embeddings", 21); }); },
       "has shape (20, 3) but the file's attributes say (21, 3)", "/weight"},
      {"invalid setting",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_string_attr(f, "plan", "fastest"); }); },
       "its settings are invalid: plan must be 'auto', 'scan', 'sort' or 'bucket', got 'fastest'"},
      {"padding_idx out of range",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_int_attr(f, "padding_idx", 20); }); },
       "its padding_idx is 20, but a kembed file stores the padding row as a row number in [0, 20) or -1 for none"},
      {"padding_idx counted from the end (torch's spelling, never stored)",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_int_attr(f, "padding_idx", -2); }); },
       "its padding_idx is -2, but a kembed file stores the padding row as a row number in [0, 20) or -1 for none"},
      {"missing attribute",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { H5Adelete(f, "embedding_dim"); }); },
       "has no attribute 'embedding_dim'"},
      {"attribute of the wrong type",
       [](std::string const& p) { write_table_with(p, [](hid_t f) { set_string_attr(f, "padding_idx", "none"); }); },
       "attribute 'padding_idx' holds strings, not an integer"},
      {"NaN in the table", nan_table, "holds NaN at row 7, column 2; a table must be finite", "/weight"},
      {"V * d overflows 64 bits",
       [&](std::string const& p) {
         write_table_with(p, [&](hid_t f) {
           replace_weight(f, H5T_IEEE_F32LE, {hsize_t(huge), hsize_t(huge)}, true);
           set_int_attr(f, "num_embeddings", huge);
           set_int_attr(f, "embedding_dim", huge);
         });
       },
       "its settings are invalid: weight: the size 1099511627776 * 1099511627776 does not fit"},
      {"larger than memory",
       [&](std::string const& p) {
         write_table_with(p, [&](hid_t f) {
           replace_weight(f, H5T_IEEE_F32LE, {hsize_t(1) << 31, hsize_t(1) << 12}, true);
           set_int_attr(f, "num_embeddings", std::int64_t{1} << 31);
           set_int_attr(f, "embedding_dim", std::int64_t{1} << 12);
         });
       },
       // The declared size is checked against what the file stores before memory is.
       "stores 0 of the 8796093022208 chunks its shape declares; the missing ones would read as zeros", "/weight"},
  };
  for (auto const& row : rows) {
    SCOPED_TRACE(row.name);
    auto const p = path("bad.h5");
    fs::remove(p);
    row.make(p);
    try {
      io::load_table(p);
      ADD_FAILURE() << row.name << ": loaded";
    } catch (io::FileError const& e) {
      std::string const what = e.what();
      EXPECT_NE(what.find(row.message), std::string::npos) << "message: " << what << "\nwant: " << row.message;
      EXPECT_NE(what.find(p), std::string::npos) << "the message names the file: " << what;
      EXPECT_EQ(e.path(), p);
      EXPECT_EQ(e.dataset(), row.dataset) << what;
    }
    EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0) << "every id the refusal opened is closed";
  }
}

// A damaged header (the root attributes' continuation chunk, OCHK, fails its
// checksum) is refused by every reader, and each closes every id it opened: what HDF5
// 1.10.8 still reports at exit ("infinite loop closing library") is its own state
// from the failed lookup, which a plain C program reproduces with the same calls.
TEST_F(Io, ADamagedHeaderIsRefusedAndEveryIdClosed) {
  auto const w = synthetic::uniform_floats(300 * 4, 9);
  io::save_table(path("t.h5"), w.data(), config(300, 4, 2));
  auto bytes = bytes_of(path("t.h5"));
  auto const at = bytes.find("OCHK");
  ASSERT_NE(at, std::string::npos) << "a kembed table's attributes continue in an OCHK chunk";
  bytes[at + 8] = char(bytes[at + 8] ^ 1);
  std::ofstream(path("d.h5"), std::ios::binary) << bytes;
  std::function<void()> const readers[] = {
      [&] { io::load_table(path("d.h5")); },
      [&] { io::load_rows(path("d.h5"), 0, 1); },
      [&] { io::check_table_finite(path("d.h5"), 0, 1); },
      [&] { io::read_run(path("d.h5")); },
      [&] { io::read_run_header(path("d.h5")); },
      [&] { io::read_checkpoint(path("d.h5"), false); },
      [&] { io::read_summary(path("d.h5")); },
      [&] { io::check_file(path("d.h5")); },
      [&] { io::describe_file(path("d.h5")); },
      [&] { io::RowReader{path("d.h5")}; },
  };
  for (std::size_t i = 0; i < std::size(readers); ++i) {
    EXPECT_THROW(readers[i](), io::FileError) << "reader " << i;
    EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0) << "every id the refusal opened is closed";
  }
}

// check_table_finite reads a table in pieces and names the first NaN or infinity.
TEST_F(Io, TablesAreCheckedFiniteInPieces) {
  auto w = special_table(70000, 64);  // 17 MiB: two pieces
  io::save_table(path("t.h5"), w.data(), config(70000, 64));
  io::check_table_finite(path("t.h5"), 0, 70000);
  hid_t f = H5Fopen(path("t.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "weight", H5P_DEFAULT);
  w[std::size_t(69000 * 64 + 5)] = std::numeric_limits<float>::quiet_NaN();
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data());
  H5Dclose(d), H5Fclose(f);
  EXPECT_NE(refusal([&] { io::check_table_finite(path("t.h5"), 0, 70000); }).find("holds NaN at row 69000, column 5"),
            std::string::npos);
  io::check_table_finite(path("t.h5"), 0, 69000);  // a rank's rows before it
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(io::sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(io::sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string const two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(io::sha256_hex(two_blocks.data(), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  io::Sha256 h;
  std::string const a(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(a.data(), a.size());
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// A file whose byte i is (i * 7 + 3) mod 251, from a 251-byte pattern.
void write_pattern(std::string const& path, std::int64_t bytes) {
  std::string pattern(251, '\0');
  for (int i = 0; i < 251; ++i) pattern[std::size_t(i)] = char((i * 7 + 3) % 251);
  std::ofstream out(path, std::ios::binary);
  for (std::int64_t at = 0; at < bytes; at += 251) out.write(pattern.data(), std::min<std::int64_t>(251, bytes - at));
}

// The values Python's hashlib gives (docs/FORMAT.md's few lines): SHA-256 over the
// 16 MiB chunks' digests; any split of the chunks over ranks joins to the same list.
TEST_F(Io, ChunkedFingerprintsAreHashlibsAndDoNotDependOnTheSplit) {
  std::int64_t const c = io::fingerprint_chunk_bytes;
  struct Case {
    std::int64_t bytes;
    char const* chunks;
    char const* file;
  };
  for (auto const& k : {Case{0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                             "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
                        Case{c, "adaf8976be4747a13ff05238fc6bfc05fbdbee0ea5ab1bfe1e33c267836354b1", nullptr},
                        Case{2 * c + 5, "a051e80254ce8b05c8c11d00ecdadcf1d2d1489d25e3ca2b3fd7d40aa2c809a0",
                             "ff995f45912381ef0a21b2ba85a8f373e4c5171739a10562bde5834246eb7446"}}) {
    SCOPED_TRACE(k.bytes);
    auto const file = path("pattern.bin");
    write_pattern(file, k.bytes);
    std::int64_t bytes = -1;
    EXPECT_EQ(io::fingerprint_file(file, io::Fingerprint::chunks, &bytes), k.chunks);
    EXPECT_EQ(bytes, k.bytes);
    if (k.file) EXPECT_EQ(io::fingerprint_file(file, io::Fingerprint::file), k.file);
    for (int ranks : {1, 2, 3, 5}) {
      std::string joined;
      for (int r = 0; r < ranks; ++r) {
        auto const [first, end] = io::chunks_of(k.bytes, ranks, r);
        joined += io::sha256_of_chunks(file, first, end);
      }
      EXPECT_EQ(io::sha256_hex(joined.data(), joined.size()), k.chunks) << ranks << " ranks";
    }
  }
  EXPECT_THROW(io::fingerprint_file(path("absent.bin"), io::Fingerprint::chunks), io::FileError);
  EXPECT_THROW(io::parse_fingerprint("sha1"), InvalidArgument);
  EXPECT_EQ(io::parse_fingerprint(std::string(io::to_string(io::Fingerprint::file))), io::Fingerprint::file);
}

}  // namespace
}  // namespace kembed
