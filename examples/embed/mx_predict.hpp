// mx_predict.hpp — a small RAII wrapper over MXNet's C predict API (<mxnet/c_predict_api.h>),
// header-only, C++11. Works with luamx's libmx or MXNet's libmxnet alike.
//
//   mxpred::Predictor p(json_text, params_bytes, {{"data", {1, 3, 224, 224}}});
//   p.set_input("data", pixels);            // std::vector<float>
//   p.forward();
//   std::vector<float> scores = p.output(0);
//
// Every failing call throws mxpred::Error with MXGetLastError()'s message. A Predictor is
// movable, not copyable, and frees its handle when it goes; use one per thread
// (Predictor::many makes n of one model, MXPredCreateMultiThread).
#ifndef MX_PREDICT_HPP
#define MX_PREDICT_HPP

#include <mxnet/c_predict_api.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mxpred {

struct Error : std::runtime_error {
  explicit Error(const std::string &what) : std::runtime_error(what) {}
};

inline void check(int rc, const char *call) {
  if (rc == 0) return;
  std::string msg = MXGetLastError();
  throw Error(msg.compare(0, std::char_traits<char>::length(call), call) == 0 ? msg
                                                                            : std::string(call) + ": " + msg);
}

struct Input {
  std::string name;
  std::vector<uint32_t> shape;
};

class Predictor {
 public:
  Predictor(const std::string &json, const std::string &params, const std::vector<Input> &inputs,
            const std::vector<std::string> &outputs = {}) {
    Spec s(inputs);
    if (outputs.empty()) {
      check(MXPredCreate(json.c_str(), params.data(), static_cast<int>(params.size()), 1, 0,
                         s.n(), s.keys.data(), s.indptr.data(), s.dims.data(), &h_),
            "MXPredCreate");
    } else {
      std::vector<const char *> keys;
      for (const auto &o : outputs) keys.push_back(o.c_str());
      check(MXPredCreatePartialOut(json.c_str(), params.data(), static_cast<int>(params.size()), 1,
                                   0, s.n(), s.keys.data(), s.indptr.data(), s.dims.data(),
                                   static_cast<uint32_t>(keys.size()), keys.data(), &h_),
            "MXPredCreatePartialOut");
    }
  }
  // n predictors sharing one model: one per thread
  static std::vector<Predictor> many(const std::string &json, const std::string &params,
                                     const std::vector<Input> &inputs, int n) {
    Spec s(inputs);
    std::vector<PredictorHandle> hs(static_cast<size_t>(n), nullptr);
    check(MXPredCreateMultiThread(json.c_str(), params.data(), static_cast<int>(params.size()), 1,
                                  0, s.n(), s.keys.data(), s.indptr.data(), s.dims.data(), n,
                                  hs.data()),
          "MXPredCreateMultiThread");
    std::vector<Predictor> ps;
    for (auto h : hs) ps.push_back(Predictor(h));
    return ps;
  }
  Predictor(Predictor &&o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  Predictor &operator=(Predictor &&o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  Predictor(const Predictor &) = delete;
  Predictor &operator=(const Predictor &) = delete;
  ~Predictor() {
    if (h_) MXPredFree(h_);
  }

  void set_input(const std::string &name, const std::vector<float> &data) {
    check(MXPredSetInput(h_, name.c_str(), data.data(), static_cast<uint32_t>(data.size())),
          "MXPredSetInput");
  }
  void forward() { check(MXPredForward(h_), "MXPredForward"); }
  std::vector<uint32_t> output_shape(uint32_t k) const {
    uint32_t *shape = nullptr, nd = 0;
    check(MXPredGetOutputShape(h_, k, &shape, &nd), "MXPredGetOutputShape");
    return std::vector<uint32_t>(shape, shape + nd);
  }
  std::vector<float> output(uint32_t k) const {
    uint32_t *shape = nullptr, nd = 0;
    check(MXPredGetOutputShape(h_, k, &shape, &nd), "MXPredGetOutputShape");
    size_t n = 1;
    for (uint32_t i = 0; i < nd; i++) n *= shape[i];
    std::vector<float> v(n);
    check(MXPredGetOutput(h_, k, v.data(), static_cast<uint32_t>(n)), "MXPredGetOutput");
    return v;
  }
  // a new predictor of the same model at other input shapes (MXPredReshape)
  Predictor reshape(const std::vector<Input> &inputs) const {
    Spec s(inputs);
    PredictorHandle out = nullptr;
    check(MXPredReshape(s.n(), s.keys.data(), s.indptr.data(), s.dims.data(), h_, &out),
          "MXPredReshape");
    return Predictor(out);
  }
  PredictorHandle handle() const { return h_; }

 private:
  explicit Predictor(PredictorHandle h) : h_(h) {}
  struct Spec {
    std::vector<const char *> keys;
    std::vector<uint32_t> indptr{0}, dims;
    explicit Spec(const std::vector<Input> &in) {
      for (const auto &i : in) {
        keys.push_back(i.name.c_str());
        dims.insert(dims.end(), i.shape.begin(), i.shape.end());
        indptr.push_back(static_cast<uint32_t>(dims.size()));
      }
    }
    uint32_t n() const { return static_cast<uint32_t>(keys.size()); }
  };
  PredictorHandle h_ = nullptr;
};

// The arrays of an MXNet .params file (MXNDListCreate): name -> (shape, float data).
class NDList {
 public:
  explicit NDList(const std::string &bytes) {
    check(MXNDListCreate(bytes.data(), static_cast<int>(bytes.size()), &h_, &n_), "MXNDListCreate");
  }
  NDList(const NDList &) = delete;
  NDList &operator=(const NDList &) = delete;
  ~NDList() {
    if (h_) MXNDListFree(h_);
  }
  uint32_t size() const { return n_; }
  std::string key(uint32_t i) const { return get(i).key; }
  std::vector<uint32_t> shape(uint32_t i) const { return get(i).shape; }
  std::vector<float> data(uint32_t i) const { return get(i).data; }

 private:
  struct Item {
    std::string key;
    std::vector<uint32_t> shape;
    std::vector<float> data;
  };
  Item get(uint32_t i) const {
    const char *key = nullptr;
    const float *data = nullptr;
    const uint32_t *shape = nullptr;
    uint32_t nd = 0;
    check(MXNDListGet(h_, i, &key, &data, &shape, &nd), "MXNDListGet");
    Item it{key, std::vector<uint32_t>(shape, shape + nd), {}};
    size_t n = 1;
    for (uint32_t d : it.shape) n *= d;
    it.data.assign(data, data + n);
    return it;
  }
  NDListHandle h_ = nullptr;
  uint32_t n_ = 0;
};

}  // namespace mxpred

#endif
