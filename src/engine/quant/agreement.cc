#include "engine/quant/agreement.h"

#include <algorithm>
#include <cmath>

#include "engine/quant/calibrate.h"

namespace surge::engine::quant {
namespace {

bool Contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

double OutputAgreement::mean_cosine_stderr() const {
  if (rows < 2) return 0;
  const double n = static_cast<double>(rows);
  const double loss_sum = n - cosine_sum;  // sum of (1 - cosine): small numbers, well scaled
  const double var = std::max(0.0, (loss_sq_sum - loss_sum * loss_sum / n) / (n - 1));
  return std::sqrt(var / n);
}

double StudentTQuantile(double confidence, int64_t dof) {
  const double pi = 3.14159265358979323846;
  if (dof == 1) return std::tan(pi * (confidence - 0.5));  // exact (Cauchy)
  if (dof == 2) return (2 * confidence - 1) / std::sqrt(2 * confidence * (1 - confidence));
  // The normal quantile by bisection on Phi(z) = confidence.
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < confidence ? lo : hi) = mid;
  }
  const double z = (lo + hi) / 2;
  if (dof <= 0) return z;
  const double v = static_cast<double>(dof), z2 = z * z;
  const double g1 = (z2 + 1) * z / 4;
  const double g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
  const double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
  const double g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
  return z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v);
}

double Agreement::cosine() const {
  double c = 1.0;
  for (const auto& o : outputs) c = std::min(c, o.mean_cosine());
  return c;
}

double Agreement::cosine_lower_bound(double confidence) const {
  double c = 1.0;
  for (const auto& o : outputs) {
    const double t = confidence > 0.5 && o.rows >= 2 ? StudentTQuantile(confidence, o.rows - 1) : 0;
    c = std::min(c, o.mean_cosine() - t * o.mean_cosine_stderr());
  }
  return c;
}

double Agreement::cosine_stderr() const {
  const OutputAgreement* worst = nullptr;
  for (const auto& o : outputs) {
    if (!worst || o.mean_cosine() < worst->mean_cosine()) worst = &o;
  }
  return worst ? worst->mean_cosine_stderr() : 0;
}

int64_t Agreement::min_rows() const {
  int64_t n = outputs.empty() ? 0 : outputs.front().rows;
  for (const auto& o : outputs) n = std::min(n, o.rows);
  return n;
}

int64_t Agreement::top1_rows() const {
  int64_t n = 0;
  for (const auto& o : outputs) n += o.top1 ? o.rows : 0;
  return n;
}

double Agreement::top1_agreement() const {
  int64_t agree = 0, rows = 0;
  for (const auto& o : outputs) {
    if (!o.top1) continue;
    agree += o.top1_agree;
    rows += o.rows;
  }
  return rows ? static_cast<double>(agree) / static_cast<double>(rows) : 1.0;
}

std::string Agreement::Summary() const {
  int64_t agree = 0;
  for (const auto& o : outputs) agree += o.top1 ? o.top1_agree : 0;
  return fmt::format("cosine {:.6f}, top-1 agreement {:.2f}% ({}/{})", cosine(),
                     100.0 * top1_agreement(), agree, top1_rows());
}

bool AgreementMeter::IsTop1(const std::string& name, const Tensor& t, const TensorMap& all) const {
  if (!top1_names_.empty()) {
    return std::find(top1_names_.begin(), top1_names_.end(), name) != top1_names_.end();
  }
  const bool any_logits = std::any_of(all.begin(), all.end(),
                                      [](const auto& kv) { return Contains(kv.first, "logit"); });
  if (any_logits) return Contains(name, "logit");
  return t.rank() >= 1 && t.shape().back() >= 2;
}

Status AgreementMeter::Add(const TensorMap& inputs, const TensorMap& reference,
                           const TensorMap& candidate) {
  const Tensor* mask = FindMask(inputs);
  for (const auto& [name, ref_t] : reference) {
    auto it = candidate.find(name);
    if (it == candidate.end()) {
      return InvalidArgumentError("the candidate engine has no output '{}'", name);
    }
    if (it->second.shape() != ref_t.shape()) {
      return InvalidArgumentError("output '{}' has shape {} but the reference has {}", name,
                                  ShapeToString(it->second.shape()), ShapeToString(ref_t.shape()));
    }
    if (!IsFloating(ref_t.dtype())) continue;
    auto slot = std::find_if(result_.outputs.begin(), result_.outputs.end(),
                             [&](const OutputAgreement& o) { return o.name == name; });
    if (slot == result_.outputs.end()) {
      result_.outputs.push_back({name, IsTop1(name, ref_t, reference)});
      slot = result_.outputs.end() - 1;
    }
    const Tensor a = ref_t.ToFloat32();
    const Tensor b = it->second.ToFloat32();
    const int64_t cols = a.rank() >= 2 ? a.shape().back() : std::max<int64_t>(a.numel(), 1);
    const int64_t rows = a.numel() / cols;
    const bool token_rows = mask != nullptr && a.rank() >= 3 && a.dim(0) == mask->dim(0) &&
                            a.dim(1) == mask->dim(1) && rows == mask->numel();
    const float* pa = a.data_as<float>();
    const float* pb = b.data_as<float>();
    for (int64_t r = 0; r < rows; ++r) {
      if (token_rows && mask->GetInt(r) == 0) continue;
      double dot = 0, na = 0, nb = 0;
      int64_t arg_a = 0, arg_b = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double x = pa[r * cols + c], y = pb[r * cols + c];
        dot += x * y;
        na += x * x;
        nb += y * y;
        const double err = std::abs(x - y);
        slot->max_abs_err = std::max(slot->max_abs_err, std::isnan(err) ? INFINITY : err);
        if (pa[r * cols + c] > pa[r * cols + arg_a]) arg_a = c;
        if (pb[r * cols + c] > pb[r * cols + arg_b]) arg_b = c;
      }
      double cos = 0;
      if (na == 0 && nb == 0) {
        cos = 1;
      } else if (na > 0 && nb > 0) {
        cos = dot / std::sqrt(na) / std::sqrt(nb);
      }
      if (std::isnan(cos)) cos = 0;
      ++slot->rows;
      slot->cosine_sum += cos;
      slot->cosine_min = std::min(slot->cosine_min, cos);
      slot->loss_sq_sum += (1 - cos) * (1 - cos);
      slot->top1_agree += arg_a == arg_b;
    }
  }
  return Status::Ok();
}

Result<Agreement> MeasureAgreement(const Engine& reference, const Engine& candidate,
                                   std::span<const TensorMap> batches,
                                   std::vector<std::string> top1_outputs) {
  SURGE_ASSIGN_OR_RETURN(auto rc, reference.CreateContext());
  SURGE_ASSIGN_OR_RETURN(auto cc, candidate.CreateContext());
  AgreementMeter meter(std::move(top1_outputs));
  for (size_t i = 0; i < batches.size(); ++i) {
    auto r = rc->Run(batches[i]);
    if (!r.ok()) return r.status().WithContext(fmt::format("reference, batch {}", i + 1));
    TensorMap owned;
    for (auto& [name, t] : *r) owned.emplace(name, t.Clone());
    auto c = cc->Run(batches[i]);
    if (!c.ok()) return c.status().WithContext(fmt::format("candidate, batch {}", i + 1));
    SURGE_RETURN_IF_ERROR(meter.Add(batches[i], owned, *c));
  }
  return meter.result();
}

}  // namespace surge::engine::quant
