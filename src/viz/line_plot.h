// Line plots as PNG: what `deepgrid bench --plot` draws for its sweeps.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid {

struct PlotSeries {
  std::string name;                               // the legend entry
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
};

struct LinePlot {
  std::string title, x_label, y_label;
  bool log2_x = false;  // x axis in powers of two (bt, memory ratio)
  std::vector<PlotSeries> series;
};

// Draws axes with ticks at the points' x values and five y ticks from 0, one coloured line
// with markers per series, a legend, title and labels (FreeType, DejaVu Sans), and writes an
// 8-bit RGB PNG.
Status write_line_plot_png(const LinePlot& plot, const std::string& path);

}  // namespace deepgrid
