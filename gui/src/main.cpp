// kembed-inspector [RUN.h5] [OTHER.h5] [--screenshot OUT.png --view counts|gradient|columns|diff|info
//                   --heatmap a|b|a-b|all --row ROW --size WxH]
// Opens one run (or table) file, or two to compare. With --screenshot it renders a
// view without a display (offscreen, unless QT_QPA_PLATFORM names another platform)
// and exits: 0, or 2 on a bad file or a bad option.
#include "main_window.hpp"

#include <kembed/io/batch_process.hpp>
#include <kembed/version.hpp>

#include <QApplication>
#include <QCommandLineParser>
#include <QImage>

#include <cstdio>
#include <cstring>

namespace {

// --help, --version and a bad option are answered as a command-line program answers
// them, with no display: QApplication aborts where it finds none ("could not connect
// to display"), so these finish under a QCoreApplication before one is made. A parse
// that fails where a window can open may only have met Qt's own options (-platform,
// -style): QApplication takes those out first. Returns false where a window is wanted.
bool finishes_without_a_window(QCommandLineParser& parser, QCommandLineOption const& help,
                               QCommandLineOption const& version, int& argc, char** argv) {
  QStringList args;
  for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
  bool const parsed = parser.parse(args);
  bool display = !qEnvironmentVariableIsEmpty("DISPLAY") || !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") ||
                 !qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM");
  for (int i = 1; i < argc; ++i) display = display || std::strcmp(argv[i], "-platform") == 0;
  if (parsed ? !parser.isSet(help) && !parser.isSet(version) && !parser.isSet("help-all") : display) return false;
  QCoreApplication core(argc, argv);
  parser.process(core);  // prints the help, the version or the error, and exits
  return true;
}

// --size's WIDTHxHEIGHT, from the window's least size to 16384 a side; invalid otherwise.
constexpr QSize least = kembed::inspector::MainWindow::least_size;
QSize size_of(QString const& text) {
  auto const wh = text.split('x');
  bool ok_w = false, ok_h = false;
  int const width = wh.size() == 2 ? wh[0].toInt(&ok_w) : 0, height = wh.size() == 2 ? wh[1].toInt(&ok_h) : 0;
  bool const fits = ok_w && ok_h && width >= least.width() && height >= least.height() && width <= 16384 &&
                    height <= 16384;
  return fits ? QSize(width, height) : QSize();
}

}  // namespace

int main(int argc, char** argv) {
  // As the kembed program: HDF5's exit clean-up is skipped (after a damaged file it may
  // hold state of its own it cannot close; every file kembed opened is closed by then).
  kembed::io::set_up_batch_process();
  QCoreApplication::setApplicationName("kembed-inspector");
  QCoreApplication::setApplicationVersion(KEMBED_VERSION_STRING);
  QCommandLineParser parser;
  parser.setApplicationDescription("See where gradients went and why two runs differ.");
  QCommandLineOption const help = parser.addHelpOption(), version = parser.addVersionOption();
  parser.addPositionalArgument("run", "A run file (or a table file) to open", "[RUN.h5]");
  parser.addPositionalArgument("other", "A second run to compare with the first", "[OTHER.h5]");
  QCommandLineOption screenshot("screenshot", "Render a view to a PNG and exit", "OUT.png");
  QCommandLineOption view("view", "The view to show: counts, gradient, columns, diff or info", "VIEW", "counts");
  QCommandLineOption size("size", "Window size for --screenshot", "WxH", "1200x800");
  QCommandLineOption row_option("row", "Select this row id", "ROW");
  QCommandLineOption heatmap("heatmap", "What the Gradient view shows: a, b, a-b or all (side by side; two files)",
                             "WHICH", "a");
  parser.addOptions({screenshot, view, size, row_option, heatmap});
  // A screenshot needs no display: choose the offscreen platform before Qt looks for one.
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--screenshot", 12) == 0 && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
      qputenv("QT_QPA_PLATFORM", "offscreen");
  if (finishes_without_a_window(parser, help, version, argc, argv)) return 1;  // process() exits before this
  QApplication app(argc, argv);
  parser.process(app);  // again, now that QApplication has taken its own options (-platform, -style) out
  auto const files = parser.positionalArguments();
  if (files.size() > 2) {
    std::fprintf(stderr, "kembed-inspector: at most two files (a run and one to compare), got %d\n", int(files.size()));
    return 2;
  }
  QString const view_name = parser.value(view);
  if (view_name != "counts" && view_name != "gradient" && view_name != "columns" && view_name != "diff" &&
      view_name != "info") {
    std::fprintf(stderr, "kembed-inspector: --view must be counts, gradient, columns, diff or info, got '%s'\n",
                 qPrintable(view_name));
    return 2;
  }

  auto bad = [](QString const& text) {
    std::fprintf(stderr, "kembed-inspector: %s\n", qPrintable(text));
    return 2;
  };
  QSize const window_size = parser.isSet(size) ? size_of(parser.value(size)) : QSize(1200, 800);
  if (!window_size.isValid())
    return bad(QString("--size must be WIDTHxHEIGHT in pixels (%1x%2 to 16384x16384), got '%3'")
                   .arg(least.width())
                   .arg(least.height())
                   .arg(parser.value(size)));
  qint64 row = -1;
  if (parser.isSet(row_option)) {
    bool ok = false;
    row = parser.value(row_option).toLongLong(&ok);
    if (!ok || row < 0) return bad("--row must be a row id (0 or more), got '" + parser.value(row_option) + "'");
    if (files.isEmpty()) return bad("--row needs a file to select the row in");
  }

  QString const which = parser.value(heatmap);
  if (which != "a" && which != "b" && which != "a-b" && which != "all")
    return bad("--heatmap must be a, b, a-b or all, got '" + which + "'");
  if (which != "a" && files.size() != 2) return bad("--heatmap " + which + " needs two files");

  kembed::inspector::MainWindow window;
  bool const headless = parser.isSet(screenshot);
  window.setQuiet(headless);
  window.setRemembering(!headless);  // a render leaves the user's recent files alone
  for (int i = 0; i < files.size(); ++i) {
    auto const slot = i == 0 ? kembed::inspector::MainWindow::Slot::A : kembed::inspector::MainWindow::Slot::B;
    if (!window.open(files[i], slot) && headless) {
      std::fprintf(stderr, "kembed-inspector: %s\n", qPrintable(window.lastError()));
      return 2;
    }
  }
  if (row >= 0 && window.datasetA() && row >= window.datasetA()->rows)
    return bad(QString("--row %1 is not a row of %2 (rows 0 to %3)")
                   .arg(row)
                   .arg(files[0])
                   .arg(window.datasetA()->rows - 1));
  using Show = kembed::inspector::GradientView::Show;
  Show const show = which == "b"     ? Show::B
                    : which == "a-b" ? Show::Difference
                    : which == "all" ? Show::SideBySide
                                     : Show::A;
  window.setView(view_name);
  window.resize(window_size);
  window.show();
  if (row >= 0) window.selectRow(row);
  if (!headless) {
    window.gradientView()->requestShow(show);  // once the checks and the comparison are done
    return app.exec();
  }

  window.waitForChecks();  // a damaged run fails here, and gives no picture
  if (window.datasetA() == nullptr || (files.size() == 2 && window.datasetB() == nullptr)) {
    std::fprintf(stderr, "kembed-inspector: %s\n", qPrintable(window.lastError()));
    return 2;
  }
  QApplication::processEvents();
  window.gradientView()->setShow(show);
  window.gradientView()->rebuild();  // bands for the final plot height
  if (row >= 0) window.selectRow(row);
  QApplication::processEvents();
  QImage const image = window.grab().toImage();
  QApplication::processEvents();  // a read that failed while painting closes its file
  if (window.datasetA() == nullptr || (files.size() == 2 && window.datasetB() == nullptr)) {
    std::fprintf(stderr, "kembed-inspector: %s\n", qPrintable(window.lastError()));
    return 2;
  }
  if (!image.save(parser.value(screenshot))) {
    std::fprintf(stderr, "kembed-inspector: %s: could not be written\n", qPrintable(parser.value(screenshot)));
    return 3;
  }
  std::printf("%s: %s view, %dx%d\n", qPrintable(parser.value(screenshot)), qPrintable(view_name), image.width(),
              image.height());
  return 0;
}
