#pragma once
// What the batch job checks about the paths it is given before it reads or writes
// anything, so that no command replaces or removes a file the user did not hand it
// for that purpose.
#include <string>

namespace kembed::job {

// Whether two paths name the same file: the same inode where both exist (so links
// and "./x" count), else the same absolute path after resolving the folders.
bool same_file(std::string const& a, std::string const& b);

// Whether anything (file, folder, FIFO, dangling link) exists at `path`.
bool path_exists(std::string const& path);

// Refuses an output path whose folder does not exist or cannot be written, and
// one that is an existing folder; InvalidArgument / IoFailure naming `option`.
void check_output_path(std::string const& option, std::string const& path);

}  // namespace kembed::job
