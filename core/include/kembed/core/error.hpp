#pragma once
// The errors kembed raises. Every message names the argument, what was given and
// what is wanted, so that a batch log alone says what to fix.
#include <cstddef>
#include <stdexcept>
#include <string>

namespace kembed {

// Base of every kembed error; argument() names the offending argument ("ids",
// "dy", "carry", "weight", "padding_idx", ...).
class Error : public std::runtime_error {
 public:
  Error(std::string argument, std::string const& message)
      : std::runtime_error("kembed: " + message), argument_(std::move(argument)) {}
  std::string const& argument() const noexcept { return argument_; }
  // what() without its "kembed: " prefix: for a caller that words the error itself.
  char const* message() const noexcept { return what() + prefix_length; }

 private:
  static constexpr std::size_t prefix_length = 8;  // "kembed: "
  std::string argument_;
};

// A value, type or shape the contract does not accept.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// An id outside [0, num_embeddings); position() is the first offending position.
class IdOutOfRange : public InvalidArgument {
 public:
  IdOutOfRange(std::string argument, std::string const& message, long long position, long long value)
      : InvalidArgument(std::move(argument), message), position_(position), value_(value) {}
  long long position() const noexcept { return position_; }
  long long value() const noexcept { return value_; }

 private:
  long long position_;
  long long value_;
};

// NaN or infinity where the contract wants finite values; index() is the first
// offending flat element index.
class NonFinite : public InvalidArgument {
 public:
  NonFinite(std::string argument, std::string const& message, long long index)
      : InvalidArgument(std::move(argument), message), index_(index) {}
  long long index() const noexcept { return index_; }

 private:
  long long index_;
};

// A torch feature that the contract refuses (max_norm, scale_grad_by_freq, sparse).
class Unsupported : public Error {
 public:
  using Error::Error;
};

}  // namespace kembed
