#pragma once
// Errors of the file layer. FileError is bad input (a file that is missing, is not
// HDF5, is damaged, or is not what kembed expects); IoFailure is the system failing
// a write (cannot create, write, sync or rename). Batch jobs map them to different
// exit statuses.
#include <kembed/core/error.hpp>

#include <string>

namespace kembed::io {

class FileError : public InvalidArgument {
 public:
  FileError(std::string path, std::string dataset, std::string const& problem)
      : InvalidArgument("file", path + (dataset.empty() ? "" : ": dataset '" + dataset + "'") + ": " + problem),
        path_(std::move(path)),
        dataset_(std::move(dataset)),
        problem_(problem) {}
  std::string const& path() const noexcept { return path_; }
  std::string const& dataset() const noexcept { return dataset_; }
  std::string const& problem() const noexcept { return problem_; }  // without the file and the dataset

 private:
  std::string path_, dataset_, problem_;
};

class IoFailure : public Error {
 public:
  IoFailure(std::string path, std::string const& problem)
      : Error("file", path + ": " + problem), path_(std::move(path)) {}
  std::string const& path() const noexcept { return path_; }

 private:
  std::string path_;
};

}  // namespace kembed::io
