// kembed-inspector [RUN.h5] [OTHER.h5] [--screenshot OUT.png --view counts|gradient|diff]
// Opens one run (or table) file, or two to compare. With --screenshot it renders a
// view without a display (QT_QPA_PLATFORM=offscreen) and exits: 0, or 2 on a bad file.
#include "main_window.hpp"

#include <QApplication>
#include <QCommandLineParser>
#include <QImage>

#include <cstdio>

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("kembed-inspector");
  QCommandLineParser parser;
  parser.setApplicationDescription("See where gradients went and why two runs differ.");
  parser.addHelpOption();
  parser.addPositionalArgument("run", "A run file (or a table file) to open", "[RUN.h5]");
  parser.addPositionalArgument("other", "A second run to compare with the first", "[OTHER.h5]");
  QCommandLineOption screenshot("screenshot", "Render a view to a PNG and exit", "OUT.png");
  QCommandLineOption view("view", "The view to show: counts, gradient or diff", "VIEW", "counts");
  QCommandLineOption size("size", "Window size for --screenshot", "WxH", "1200x800");
  QCommandLineOption row("row", "Select this row id", "ROW");
  parser.addOptions({screenshot, view, size, row});
  parser.process(app);
  auto const files = parser.positionalArguments();
  if (files.size() > 2) {
    std::fprintf(stderr, "kembed-inspector: at most two files (a run and one to compare), got %d\n", int(files.size()));
    return 2;
  }
  QString const view_name = parser.value(view);
  if (view_name != "counts" && view_name != "gradient" && view_name != "diff") {
    std::fprintf(stderr, "kembed-inspector: --view must be counts, gradient or diff, got '%s'\n",
                 qPrintable(view_name));
    return 2;
  }

  kembed::inspector::MainWindow window;
  bool const headless = parser.isSet(screenshot);
  window.setQuiet(headless);
  for (int i = 0; i < files.size(); ++i) {
    auto const slot = i == 0 ? kembed::inspector::MainWindow::Slot::A : kembed::inspector::MainWindow::Slot::B;
    if (!window.open(files[i], slot) && headless) {
      std::fprintf(stderr, "kembed-inspector: %s\n", qPrintable(window.lastError()));
      return 2;
    }
  }
  window.setView(view_name);
  auto const wh = parser.value(size).split('x');
  if (wh.size() == 2) window.resize(wh[0].toInt(), wh[1].toInt());
  window.show();
  if (parser.isSet(row)) window.selectRow(parser.value(row).toLongLong());
  if (!headless) return app.exec();

  window.waitForChecks();  // a damaged run fails here, and gives no picture
  if (window.datasetA() == nullptr || (files.size() == 2 && window.datasetB() == nullptr)) {
    std::fprintf(stderr, "kembed-inspector: %s\n", qPrintable(window.lastError()));
    return 2;
  }
  QApplication::processEvents();
  window.gradientView()->rebuild();  // bands for the final plot height
  if (parser.isSet(row)) window.selectRow(parser.value(row).toLongLong());
  QApplication::processEvents();
  QImage const image = window.grab().toImage();
  if (!image.save(parser.value(screenshot))) {
    std::fprintf(stderr, "kembed-inspector: %s: could not be written\n", qPrintable(parser.value(screenshot)));
    return 3;
  }
  std::printf("%s: %s view, %dx%d\n", qPrintable(parser.value(screenshot)), qPrintable(view_name), image.width(),
              image.height());
  return 0;
}
