// Chunks read and written past HDF5's filter pipeline: the bytes and checksums HDF5
// would have, and its errors kept off stderr.
#include "io_fixture.hpp"

namespace kembed {
namespace {

TEST_F(Io, Fletcher32IsHdf5sBitForBit) {
  std::vector<unsigned char> random_bytes(std::size_t(3) << 20);
  std::uint64_t state = 12345;
  for (auto& b : random_bytes) b = static_cast<unsigned char>((state = state * 6364136223846793005u + 1) >> 56);
  std::vector<unsigned char> ones(random_bytes.size(), 0xff), zeros(random_bytes.size(), 0);
  // Every length up to a few blocks of 360 words (odd ones too), from an odd address as well.
  for (std::size_t n = 0; n <= 2200; ++n)
    for (std::size_t from : {0, 1}) {
      ASSERT_EQ(io::detail::fletcher32(random_bytes.data() + from, n),
                H5_checksum_fletcher32(random_bytes.data() + from, n))
          << n << " bytes from " << from;
      ASSERT_EQ(io::detail::fletcher32(ones.data() + from, n), H5_checksum_fletcher32(ones.data() + from, n)) << n;
    }
  // Chunk-sized inputs; words of 0xffff make the 32-bit sums wrap, which HDF5's own do too.
  for (std::size_t n : {std::size_t(1) << 20, (std::size_t(1) << 20) + 3, random_bytes.size() - 1, random_bytes.size()})
    for (std::vector<unsigned char> const* data : {&random_bytes, &ones, &zeros})
      EXPECT_EQ(io::detail::fletcher32(data->data(), n), H5_checksum_fletcher32(data->data(), n)) << n;
}

TEST_F(Io, ChunksReadPastTheFilterPipelineAreHdf5sValues) {
  // Rows of 28 bytes (odd word counts per chunk) in chunks of 37 rows, and a last chunk
  // that is partly outside the dataset; every range against HDF5's own read.
  std::int64_t const v = 300, d = 7;
  auto const w = save_chunked_table("t.h5", v, d, 37);
  std::vector<float> by_hdf5(std::size_t(v * d));
  {
    hid_t f = H5Fopen(path("t.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    ASSERT_GE(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, by_hdf5.data()), 0);
    std::vector<float> got(std::size_t(v * d) + 1, -7.0f);
    for (auto [first, count] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {0, 300}, {0, 37}, {0, 74}, {37, 37}, {1, 36}, {36, 2}, {5, 290}, {296, 4}, {299, 1}, {259, 41}}) {
      std::fill(got.begin(), got.end(), -7.0f);
      ASSERT_EQ(io::detail::read_rows_direct(dset, H5T_NATIVE_FLOAT, first, count, got.data()),
                io::detail::DirectRead::done)
          << first << " + " << count;
      EXPECT_EQ(std::memcmp(got.data(), by_hdf5.data() + first * d, std::size_t(count * d) * 4), 0)
          << first << " + " << count;
      EXPECT_EQ(got[std::size_t(count * d)], -7.0f) << "nothing written past the range";
    }
    // Not kembed's layout (HDF5's conversion to doubles): left to HDF5, nothing written.
    std::vector<double> doubles(4, -7.0);
    EXPECT_EQ(io::detail::read_rows_direct(dset, H5T_NATIVE_DOUBLE, 0, 1, doubles.data()),
              io::detail::DirectRead::unsuitable);
    EXPECT_EQ(doubles[0], -7.0);
    H5Dclose(dset), H5Fclose(f);
  }
  EXPECT_TRUE(same_bits(io::load_table(path("t.h5")).weight, w));
  // A deflated table has two filters: HDF5 reads it, with the same values.
  io::SaveOptions so;
  so.rows_per_chunk = 37;
  so.deflate = true;
  io::save_table(path("z.h5"), w.data(), config(v, d), so);
  EXPECT_TRUE(same_bits(io::load_table(path("z.h5")).weight, w));
}

TEST_F(Io, ChunksWrittenPastTheFilterPipelineAreTheBytesHdf5Stores) {
  // The same rows written in the same calls (some cutting chunks, one a whole chunk
  // and more, one inside a chunk) once by kembed's writer and once by HDF5's own.
  std::int64_t const v = 300, d = 7;
  auto const w = synthetic::uniform_floats(v * d, 9);
  std::vector<std::pair<std::int64_t, std::int64_t>> const calls{{0, 50}, {50, 100}, {150, 10}, {160, 140}};
  io::SaveOptions so;
  so.rows_per_chunk = 37;
  auto const write = [&](std::string const& name, bool through_hdf5) {
    hid_t f = H5Fcreate(path(name).c_str(), H5F_ACC_TRUNC, io::h5::reproducible_fcpl(), io::h5::compatible_fapl());
    {
      auto dset = io::detail::create_matrix(f, "weight", H5T_IEEE_F32LE, v, d, so);
      hid_t const transfer = through_hdf5 ? H5Pcreate(H5P_DATASET_XFER) : H5P_DEFAULT;  // not the default: HDF5's path
      for (auto [first, count] : calls)
        io::detail::write_block(dset, "weight", H5T_NATIVE_FLOAT, first, count, w.data() + first * d, transfer);
      if (through_hdf5) H5Pclose(transfer);
    }
    H5Fclose(f);
  };
  write("kembeds.h5", false);
  write("hdf5s.h5", true);
  auto const chunks = [&](std::string const& name) {
    std::vector<std::vector<unsigned char>> all;
    hid_t f = H5Fopen(path(name).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    for (std::int64_t row0 = 0; row0 < v; row0 += 37) {
      hsize_t const offset[2] = {hsize_t(row0), 0};
      hsize_t bytes = 0;
      EXPECT_GE(H5Dget_chunk_storage_size(dset, offset, &bytes), 0);
      std::vector<unsigned char> chunk(bytes);
      std::uint32_t skipped = 0;
      EXPECT_GE(H5Dread_chunk(dset, H5P_DEFAULT, offset, &skipped, chunk.data()), 0);
      all.push_back(std::move(chunk));
    }
    H5Dclose(dset), H5Fclose(f);
    return all;
  };
  auto const ours = chunks("kembeds.h5"), theirs = chunks("hdf5s.h5");
  ASSERT_EQ(ours.size(), 9u);
  for (std::size_t c = 0; c < ours.size(); ++c) {
    EXPECT_EQ(ours[c].size(), std::size_t(37 * d * 4 + 4)) << c;
    EXPECT_TRUE(ours[c] == theirs[c]) << "chunk " << c;
  }
  // Each reads back as the rows written, through HDF5's own filter too.
  for (auto const* name : {"kembeds.h5", "hdf5s.h5"}) {
    std::vector<float> back(std::size_t(v * d));
    hid_t f = H5Fopen(path(name).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    EXPECT_GE(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), 0);
    H5Dclose(dset), H5Fclose(f);
    EXPECT_TRUE(same_bits(back, w)) << name;
  }
}

TEST_F(Io, ACorruptedChunkFailsItsChecksum) {
  std::int64_t const v = 512, d = 16;
  auto const w = save_chunked_table("t.h5", v, d, 64);
  // Where HDF5 stored chunk 3 (rows 192..255), then flip one byte in its middle.
  haddr_t address = 0;
  hsize_t size = 0;
  {
    hid_t f = H5Fopen(path("t.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    hsize_t const offset[2] = {192, 0};
    unsigned mask = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(dset, offset, &mask, &address, &size), 0);
    H5Dclose(dset), H5Fclose(f);
  }
  ASSERT_GT(size, 100u);
  {
    std::fstream file(path("t.h5"), std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(std::streamoff(address + size / 2));
    char byte = 0;
    file.read(&byte, 1);
    byte = char(byte ^ 0x10);
    file.seekp(std::streamoff(address + size / 2));
    file.write(&byte, 1);
  }
  {  // kembed's chunk reader and HDF5's filter both catch it
    hid_t f = H5Fopen(path("t.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(f, "weight", H5P_DEFAULT);
    std::vector<float> rows(std::size_t(v * d));
    EXPECT_EQ(io::detail::read_rows_direct(dset, H5T_NATIVE_FLOAT, 0, v, rows.data()), io::detail::DirectRead::damaged);
    EXPECT_EQ(io::detail::read_rows_direct(dset, H5T_NATIVE_FLOAT, 0, 192, rows.data()), io::detail::DirectRead::done);
    io::h5::Quiet quiet;  // HDF5 would print its report of the failure
    EXPECT_LT(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
    H5Dclose(dset), H5Fclose(f);
  }
  try {
    io::load_table(path("t.h5"));
    ADD_FAILURE() << "a corrupted chunk loaded";
  } catch (io::FileError const& e) {
    EXPECT_NE(std::string(e.what()).find("do not match their checksum"), std::string::npos) << e.what();
    EXPECT_EQ(e.dataset(), "/weight");
  }
  // The rows outside the damaged chunk still read.
  EXPECT_TRUE(
      same_bits(io::load_rows(path("t.h5"), 0, 192).weight, std::vector<float>(w.begin(), w.begin() + 192 * d)));
  EXPECT_THROW(io::load_rows(path("t.h5"), 200, 1), io::FileError);
}

TEST_F(Io, HdfFiveErrorsDoNotReachStderr) {
  std::ofstream(path("junk.h5")) << "not hdf5";
  auto w = synthetic::uniform_floats(20000 * 8, 1);
  io::save_table(path("cut.h5"), w.data(), config(20000, 8));
  fs::resize_file(path("cut.h5"), fs::file_size(path("cut.h5")) / 2);
  std::fflush(stderr);
  int const saved = ::dup(2);
  int const capture = ::open(path("stderr.txt").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ::dup2(capture, 2);
  for (auto const* name : {"junk.h5", "cut.h5", "missing.h5"}) EXPECT_THROW(io::load_table(path(name)), io::FileError);
  EXPECT_THROW(io::read_table_dataset(path("cut.h5"), "nope"), io::FileError);
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(capture);
  EXPECT_EQ(bytes_of(path("stderr.txt")), "");
}

}  // namespace
}  // namespace kembed
