// Schemes: parsing and validation with errors that name the entry, presets, records, and the
// refusals of runs whose scheme does not suit the grid or the method.
#include "deepgrid/scheme.h"

#include <gtest/gtest.h>

#include <string>

#include "deepgrid/run.h"
#include "deepgrid/store.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

std::string error_of(const std::string& json) {
  auto s = Scheme::from_json(json);
  EXPECT_FALSE(s.ok()) << json;
  return s.ok() ? "" : s.status().message();
}

TEST(SchemeTest, PresetsDeclareTheirFieldsAndReach) {
  const Scheme w = Scheme::preset("wave8").value();
  EXPECT_EQ(w.components(), (std::vector<std::string>{"u", "u@1", "m"}));
  EXPECT_EQ(w.radius_x(), 4);
  EXPECT_EQ(w.radius_z(), 4);
  EXPECT_TRUE(w.is_coefficient(2));
  EXPECT_FALSE(w.is_stencil());
  EXPECT_EQ(w.carried(), (std::vector<std::pair<int, int>>{{1, 0}, {2, 2}}));
  // 2u (1 + 1), -u@1 (1 + 2), m lap8 (25 points: 49, + 1 factor + 2).
  EXPECT_EQ(w.flops_per_update(), 2 + 3 + 52);
  EXPECT_EQ(Scheme::preset("heat-var")->components(), (std::vector<std::string>{"u", "kappa"}));
  EXPECT_FALSE(Scheme::preset("wave3").ok());
}

TEST(SchemeTest, AStencilIsTheSchemeOfOneTerm) {
  const Stencil st = Stencil::preset("27pt").value();
  const Scheme s(st);
  EXPECT_TRUE(s.is_stencil());
  EXPECT_EQ(s.to_json(), st.to_json());  // records of plain runs are unchanged
  EXPECT_EQ(s.flops_per_update(), st.flops_per_update());
  EXPECT_TRUE(Scheme::from_record(s.to_json())->is_stencil());
  const Scheme w = Scheme::preset("wave4").value();
  EXPECT_EQ(Scheme::from_record(w.to_json())->to_json(), w.to_json());
  EXPECT_TRUE(Scheme::resolve("wave2").ok());
  EXPECT_TRUE(Scheme::resolve("7pt")->is_stencil());
  EXPECT_NE(Scheme::resolve("nope").status().message().find("wave8"), std::string::npos);
}

TEST(SchemeTest, ErrorsNameWhatIsWrong) {
  EXPECT_NE(error_of("{").find("malformed"), std::string::npos);
  EXPECT_NE(error_of(R"({"fields": [{"name": "u"}], "update": {"u": [{"field": "v"}]}})")
                .find("'v', which is not a field"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"fields": [{"name": "u"}], "update": {"u": [{"field": "u@1"}]}})").find("'u@1'"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"fields": [{"name": "u", "levels": 9}], "update": {}})").find("levels"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"fields": [{"name": "u"}, {"name": "k", "coefficient": true}],
                        "update": {"u": [{"field": "u"}], "k": [{"field": "u"}]}})")
                .find("read-only"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"fields": [{"name": "u"}, {"name": "v"}], "update": {"u": [{"field": "u"}]}})")
          .find("state field v has no update"),
      std::string::npos);
  EXPECT_NE(
      error_of(R"({"fields": [{"name": "u"}], "update": {"u": [{"field": "u", "coef": {}}]}})")
          .find("\"coef\" must be"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"fields": [{"name": "u"}],
                        "update": {"u": [{"field": "u", "stencil": "lap"}]}})")
                .find("unknown stencil 'lap'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"fields": [{"name": "2u"}], "update": {}})").find("letters"),
            std::string::npos);
}

class SchemeRuns : public ::testing::Test {
 protected:
  std::string make(const std::string& name, const Scheme& scheme) {
    CreateOptions co;
    co.shape = {12, 10, 9};
    co.fields = initial_fields(scheme, InitSpec{InitSpec::Kind::kGaussian, 0, 0});
    co.scheme = scheme.is_stencil() ? "" : scheme.to_json();
    const std::string dir = tmp_.path().string() + "/" + name;
    EXPECT_TRUE(Grid::create(dir, co).ok());
    return dir;
  }
  testing::TempDir tmp_;
};

TEST_F(SchemeRuns, AGridRunsItsOwnSchemeWhenNoneIsGiven) {
  const std::string dir = make("w", Scheme::preset("wave2").value());
  RunOptions opt;
  opt.steps = 3;
  const auto r = run_grid(dir, opt);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->stencil, "wave2");
  EXPECT_EQ(Grid::open(dir)->manifest().step, 3);
  // A plain grid has no scheme of its own.
  const std::string plain = make("p", Scheme(Stencil::preset("7pt").value()));
  EXPECT_NE(run_grid(plain, opt).status().message().find("give --stencil"), std::string::npos);
}

TEST_F(SchemeRuns, ASchemeWhoseFieldsTheGridLacksIsRefusedAndNothingChanges) {
  const std::string dir = make("w", Scheme::preset("wave4").value());
  RunOptions opt;
  opt.steps = 2;
  opt.scheme = Scheme::preset("heat-var").value();
  const Status st = run_grid(dir, opt).status();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("hold u, u@1, m but heat-var needs u, kappa"), std::string::npos);
  opt.scheme = Stencil::preset("7pt").value();
  EXPECT_EQ(run_grid(dir, opt).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Grid::open(dir)->manifest().step, 0);
}

TEST_F(SchemeRuns, TheTiledMethodRefusesSchemes) {
  const std::string dir = make("w", Scheme::preset("heat-var").value());
  RunOptions opt;
  opt.steps = 2;
  opt.method = Method::kTiled;
  opt.mem_budget = 1 << 20;
  const Status st = run_grid(dir, opt).status();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("plain stencils"), std::string::npos);
}

}  // namespace
}  // namespace deepgrid
