// predict_cxx.cpp — a C++ host using MXNet's C predict API through the RAII wrapper
// mx_predict.hpp: runs an exported model on the arrays of an MXNet .params file and
// compares with the outputs stored beside them.
//
//   predict_cxx model-symbol.json model-0000.params io.params
//
// io.params holds "data" (the input) and "out0", "out1", ... (the expected outputs, as
// the exporting framework computed them). Also makes two predictors of the model on two
// threads and a reshaped one (batch doubled), and checks a bad input name throws.
#include "mx_predict.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

static std::string slurp(const char *path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw mxpred::Error(std::string("cannot read ") + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

static double max_rel(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size()) return INFINITY;
  double w = 0;
  for (size_t i = 0; i < a.size(); i++) w = std::fmax(w, std::fabs(a[i] - b[i]) / (1 + std::fabs(b[i])));
  return w;
}

int main(int argc, char **argv) try {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0] << " model-symbol.json model-0000.params io.params\n";
    return 2;
  }
  std::string json = slurp(argv[1]), params = slurp(argv[2]);
  mxpred::NDList io(slurp(argv[3]));
  std::map<std::string, uint32_t> at;
  for (uint32_t i = 0; i < io.size(); i++) at[io.key(i)] = i;
  if (!at.count("data") || !at.count("out0")) throw mxpred::Error("io.params lacks data / out0");
  std::vector<uint32_t> shape = io.shape(at["data"]);
  std::vector<float> x = io.data(at["data"]);

  mxpred::Predictor p(json, params, {{"data", shape}});
  p.set_input("data", x);
  p.forward();
  for (uint32_t k = 0; at.count("out" + std::to_string(k)); k++) {
    double e = max_rel(p.output(k), io.data(at["out" + std::to_string(k)]));
    std::cout << "output " << k << ": max rel err " << e << "\n";
    if (!(e <= 1e-4)) return 1;
  }

  auto ps = mxpred::Predictor::many(json, params, {{"data", shape}}, 2);
  std::vector<std::vector<float>> outs(2);
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; i++)
    ts.emplace_back([&, i] {
      ps[i].set_input("data", x);
      ps[i].forward();
      outs[i] = ps[i].output(0);
    });
  for (auto &t : ts) t.join();
  if (outs[0] != outs[1] || outs[0] != p.output(0)) return 1;
  std::cout << "2 threads, one model: same output\n";

  std::vector<uint32_t> big = shape;
  big[0] *= 2;
  mxpred::Predictor q = p.reshape({{"data", big}});
  std::vector<float> xx(2 * x.size());
  std::copy(x.begin(), x.end(), xx.begin());
  std::copy(x.begin(), x.end(), xx.begin() + static_cast<std::ptrdiff_t>(x.size()));
  q.set_input("data", xx);
  q.forward();
  std::vector<float> y = q.output(0), half(y.begin(), y.begin() + y.size() / 2);
  if (max_rel(half, p.output(0)) > 1e-5) return 1;
  std::cout << "reshaped to batch " << big[0] << ": same first half\n";

  try {
    p.set_input("no_such_input", x);
    return 1;
  } catch (const mxpred::Error &e) {
    std::cout << "error: " << e.what() << "\n";
  }
  return 0;
} catch (const std::exception &e) {
  std::cerr << "predict_cxx: " << e.what() << "\n";
  return 1;
}
