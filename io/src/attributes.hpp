#pragma once
// Attributes: those a format requires, the padding rule, and the identity (format
// tag, kembed version, creating command) every kembed file starts with.
#include "h5.hpp"

#include <kembed/core/bags.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/table_file.hpp>

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kembed::io::detail {

// Attributes a format requires: the value, or a FileError naming the attribute.
std::int64_t required_int64(hid_t obj, std::string const& path, char const* name);
std::string required_string(hid_t obj, std::string const& path, char const* name);
// A file's padding_idx, already read, checked against the file's rule: the padding
// row as a row number in [0, rows), or -1 for none. A negative row counted from the
// end (torch's spelling, which the API and the command line take) is never stored,
// so a file holding one is refused rather than read as another row.
std::int64_t stored_padding_idx(std::string const& path, std::int64_t value, std::int64_t rows);
// The writers' side of the same rule: an InvalidArgument before anything is written.
void check_padding_to_store(char const* what, std::int64_t value, std::int64_t rows);

// The settings run files and checkpoints record: written as their text (docs/FORMAT.md;
// scale_grad_by_freq only when it is not none), read back typed. Text kembed never
// writes is a FileError naming the file: it was damaged or edited.
// (`plan` null: written by the caller, a run file's before its plan_used.)
void write_settings(hid_t obj, std::optional<Plan> plan, Mode mode, FreqScale scale);
Plan recorded_plan(hid_t obj, std::string const& path);
Mode recorded_mode(hid_t obj, std::string const& path);
FreqScale recorded_scale(hid_t obj, std::string const& path);  // none where absent
// A bag run's or checkpoint's pooling and bag count (`bags`: the batch's B, or the
// bags folded); neither is written for positions, and absent reads as none and 0.
void write_pooling(hid_t obj, std::optional<Pooling> pooling, std::int64_t bags);
std::optional<Pooling> recorded_pooling(hid_t obj, std::string const& path);
std::int64_t recorded_bags(hid_t obj, std::string const& path, std::optional<Pooling> pooling);

std::string utc_now_iso8601();

// The attributes every kembed file starts with: its format tag and the kembed that
// wrote it, and (where `created_by` is not null) the creating command, which is this
// process's command line unless the caller gave one.
void write_identity(hid_t root, char const* format, SaveOptions const* created_by = nullptr);

// This process's command line, arguments joined by spaces ("" where unknown).
std::string own_command_line();

}  // namespace kembed::io::detail
