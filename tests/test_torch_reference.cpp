// torch's CPU embedding backward is the contract's reference: its gradients for
// the cases in data/torch_reference.txt (made by scripts/make_torch_reference.py)
// must come out of every plan bit for bit. torch itself is not needed to run this.
#include "support/test_support.hpp"

#include <kembed/embedding.hpp>

#include <fstream>
#include <sstream>

namespace kembed {
namespace {

struct TorchCase {
  std::string name;
  std::int64_t rows = 0, dim = 0;
  std::optional<std::int64_t> padding;
  std::vector<std::int64_t> ids, counts;
  std::vector<float> dy, grad;
};

std::vector<TorchCase> load_cases() {
  std::ifstream file(test::data_file("torch_reference.txt"));
  std::vector<TorchCase> cases;
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind("case ", 0) != 0) continue;
    std::istringstream head(line.substr(5));
    TorchCase c;
    std::string pad;
    std::int64_t t = 0;
    head >> c.name >> c.rows >> c.dim >> pad >> t;
    if (pad != "none") c.padding = std::stoll(pad);
    std::string ids, dy, grad, counts;
    std::getline(file, ids);
    std::getline(file, dy);
    std::getline(file, grad);
    std::getline(file, counts);
    c.ids = test::parse_ints(ids);
    c.dy = test::parse_hex(dy);
    c.grad = test::parse_hex(grad);
    c.counts = test::parse_ints(counts);
    EXPECT_EQ(std::int64_t(c.ids.size()), t) << c.name;
    EXPECT_EQ(std::int64_t(c.dy.size()), t * c.dim) << c.name;
    EXPECT_EQ(std::int64_t(c.grad.size()), c.rows * c.dim) << c.name;
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(TorchReference, EveryPlanEqualsTorchBitForBit) {
  auto const cases = load_cases();
  ASSERT_EQ(cases.size(), 8u) << "tests/data/torch_reference.txt is missing or incomplete";
  for (auto const& c : cases) {
    auto const table = test::table_for(c.rows, c.dim);
    for (auto plan : {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic}) {
      SCOPED_TRACE(c.name + ", plan " + std::string(to_string(plan)));
      Options o;
      o.padding_idx = c.padding;
      o.plan = plan;
      Embedding<TEST_EXECSPACE> layer(c.rows, c.dim, FloatsRef(table.data(), Shape{c.rows, c.dim}), o);
      auto const g = layer.backward(IdsRef(c.ids), FloatsRef(c.dy.data(), Shape{std::int64_t(c.ids.size()), c.dim}));
      EXPECT_TRUE(test::same_bits(g.values, c.grad));
      EXPECT_EQ(g.counts, c.counts);
    }
  }
}

}  // namespace
}  // namespace kembed
