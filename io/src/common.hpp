#pragma once
// What table and run files share, by concern: opening and validating (open_file.hpp),
// dataset I/O (datasets.hpp), the crash-safe streaming writer (streaming_file.hpp),
// and attributes with the padding rule (attributes.hpp). A file that uses all four
// includes this; others include what they use.
#include "attributes.hpp"
#include "datasets.hpp"
#include "open_file.hpp"
#include "streaming_file.hpp"
