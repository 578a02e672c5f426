// Creates a small grid, advances it with the installed library, and checks the result against
// a value computed by hand: exits 0 only if everything worked.
#include <deepgrid/run.h>
#include <deepgrid/store.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  deepgrid::CreateOptions co;
  co.shape = {3, 1, 1};
  co.init = deepgrid::parse_init("const:1").value();
  if (!deepgrid::Grid::create(dir, co).ok()) return 1;
  deepgrid::RunOptions opt;
  opt.scheme = deepgrid::Stencil::preset("5pt").value();  // centre 1/2, neighbours 1/8
  opt.steps = 1;
  auto report = deepgrid::run_grid(dir, opt);
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().message().c_str());
    return 1;
  }
  float v[3];
  if (!deepgrid::Grid::open(dir)->read_planes(0, 1, v).ok()) return 1;
  // Middle point: 1/2 + 2 * 1/8 (x neighbours) + 2 * 1/8 * 0 (y neighbours, dirichlet:0).
  const bool ok = v[1] == 0.75f && v[0] == 0.625f && v[2] == 0.625f;
  std::printf("downstream: %s (%g %g %g)\n", ok ? "ok" : "WRONG", v[0], v[1], v[2]);
  return ok ? 0 : 1;
}
