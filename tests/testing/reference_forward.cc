#include "tests/testing/reference_forward.h"

#include <algorithm>
#include <cmath>

#include "loaders/fp16.h"
#include "loaders/quants.h"

namespace pinfer::testing {
namespace {

using Vec = std::vector<double>;
using Rows = std::vector<Vec>;  // [tokens][width]

// A weight matrix as doubles, row-major [rows][cols].
struct Dense {
  int64_t rows = 0, cols = 0;
  Vec v;
};

Dense ToDense(const WeightMatrix& w) {
  Dense d{w.rows, w.cols, Vec(static_cast<size_t>(w.rows * w.cols))};
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeRow(w.type, w.row(r), row.data(), w.cols);
    std::copy(row.begin(), row.end(), d.v.begin() + r * w.cols);
  }
  return d;
}

Vec MatVec(const Dense& w, const Vec& x) {
  Vec y(static_cast<size_t>(w.rows), 0.0);
  for (int64_t r = 0; r < w.rows; ++r) {
    const double* a = w.v.data() + r * w.cols;
    double s = 0;
    for (int64_t c = 0; c < w.cols; ++c) s += a[c] * x[c];
    y[r] = s;
  }
  return y;
}

// x / sqrt(mean(x^2) + eps) * w over [begin, begin + n), in place (llama.cpp's build_norm
// with LLM_NORM_RMS; gemma files already hold 1 + w).
void RmsNorm(double* x, int n, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const double s = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) x[i] = x[i] * s * w[i];
}

// ggml_rope_ext: NORM (adjacent pairs) or NEOX (halves) over the first n_rot values of each
// head, angle pos * base^(-2i / n_rot) / factor[i] * freq_scale.
void Rope(double* v, int heads, const ModelConfig& c, int pos, const LayerAttention& la) {
  const int n_rot = c.n_rot > 0 ? c.n_rot : c.head_dim;
  for (int h = 0; h < heads; ++h) {
    double* x = v + static_cast<int64_t>(h) * c.head_dim;
    for (int i = 0; i < n_rot / 2; ++i) {
      double theta = pos * std::pow(static_cast<double>(la.rope_theta), -2.0 * i / n_rot);
      if (!c.rope_freq_factors.empty()) theta /= c.rope_freq_factors[static_cast<size_t>(i)];
      theta *= la.rope_freq_scale;
      const bool neox = c.rope_style == RopeStyle::kHalves;
      const int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
      const double x0 = x[a], x1 = x[b];
      x[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
      x[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
}

double Gelu(double x) {  // tanh approximation (ggml_gelu, gelu_pytorch_tanh)
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// ggml-cpu's table GELU (ggml_vec_geglu_f32 with GGML_GELU_FP16).
double GgmlCpuGelu(double x) {
  if (x <= -10.0) return 0.0;
  if (x >= 10.0) return x;
  const double h = Fp16ToFp32(Fp32ToFp16(static_cast<float>(x)));
  return Fp16ToFp32(Fp32ToFp16(static_cast<float>(Gelu(h))));
}

// Attention of every token of one layer: q [n][q_dim], k/v [n][kv_dim] -> [n][q_dim].
Rows Attend(const ModelConfig& c, const LayerAttention& la, const Rows& q, const Rows& k,
            const Rows& v) {
  const int n = static_cast<int>(q.size()), hd = c.head_dim;
  const int group = c.n_heads / c.n_kv_heads;
  const double scale = c.query_scale > 0 ? 1.0 : 1.0 / std::sqrt(static_cast<double>(hd));
  Rows out(static_cast<size_t>(n), Vec(static_cast<size_t>(c.q_dim()), 0.0));
  for (int t = 0; t < n; ++t) {
    // llama.cpp's kq_mask: causal, and for a window layer p1 - p0 < n_swa.
    const int first = la.window > 0 ? std::max(0, t - la.window + 1) : 0;
    for (int h = 0; h < c.n_heads; ++h) {
      const int kvh = h / group;
      Vec s;
      for (int j = first; j <= t; ++j) {
        double dot = 0;
        for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[j][kvh * hd + i];
        if (c.attn_softcap > 0) dot = c.attn_softcap * std::tanh(dot / c.attn_softcap);
        s.push_back(dot * scale);
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int j = first; j <= t; ++j) {
        const double p = s[static_cast<size_t>(j - first)] / sum;
        for (int i = 0; i < hd; ++i) out[t][h * hd + i] += p * v[j][kvh * hd + i];
      }
    }
  }
  return out;
}

void AttentionBlock(const ModelConfig& c, const LayerWeights& L, int l, Rows& x) {
  const LayerAttention la = c.layer(l);
  const Dense wq = ToDense(L.wq), wk = ToDense(L.wk), wv = ToDense(L.wv), wo = ToDense(L.wo);
  Rows q, k, v;
  for (size_t t = 0; t < x.size(); ++t) {
    Vec h = x[t];
    RmsNorm(h.data(), c.dim, L.attn_norm, c.rms_eps);
    q.push_back(MatVec(wq, h));
    k.push_back(MatVec(wk, h));
    v.push_back(MatVec(wv, h));
    for (size_t i = 0; i < L.bq.size(); ++i) q[t][i] += L.bq[i];
    for (size_t i = 0; i < L.bk.size(); ++i) k[t][i] += L.bk[i];
    for (size_t i = 0; i < L.bv.size(); ++i) v[t][i] += L.bv[i];
    if (c.qk_norm) {
      for (int hh = 0; hh < c.n_heads; ++hh)
        RmsNorm(&q[t][hh * c.head_dim], c.head_dim, L.q_norm, c.rms_eps);
      for (int hh = 0; hh < c.n_kv_heads; ++hh)
        RmsNorm(&k[t][hh * c.head_dim], c.head_dim, L.k_norm, c.rms_eps);
    }
    Rope(q[t].data(), c.n_heads, c, static_cast<int>(t), la);
    Rope(k[t].data(), c.n_kv_heads, c, static_cast<int>(t), la);
    if (c.query_scale > 0) {
      for (double& e : q[t]) e *= c.query_scale;
    }
  }
  const Rows att = Attend(c, la, q, k, v);
  for (size_t t = 0; t < x.size(); ++t) {
    Vec o = MatVec(wo, att[t]);
    if (c.post_norms) RmsNorm(o.data(), c.dim, L.attn_post_norm, c.rms_eps);
    for (int i = 0; i < c.dim; ++i) x[t][i] += o[i];
  }
}

// The next u in [-1, 1) of a 64-bit linear congruential sequence (Knuth's MMIX constants).
double NextJitter(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<double>(state >> 11) * 0x1p-52 - 1.0;
}

void FfnBlock(const ModelConfig& c, const LayerWeights& L, const ReferenceOptions& o,
              uint64_t& jitter, Rows& x) {
  const Dense wg = ToDense(L.w_gate), wu = ToDense(L.w_up), wd = ToDense(L.w_down);
  for (Vec& row : x) {
    Vec h = row;
    RmsNorm(h.data(), c.dim, L.ffn_norm, c.rms_eps);
    Vec g = MatVec(wg, h);
    const Vec u = MatVec(wu, h);
    for (size_t i = 0; i < g.size(); ++i) {
      if (o.gelu_input_jitter != 0) g[i] *= 1.0 + o.gelu_input_jitter * NextJitter(jitter);
      const double a = c.ffn_act == FfnActivation::kSilu ? g[i] / (1.0 + std::exp(-g[i]))
                       : o.ggml_cpu_gelu                 ? GgmlCpuGelu(g[i])
                                                         : Gelu(g[i]);
      g[i] = a * u[i];
    }
    Vec d = MatVec(wd, g);
    if (c.post_norms) RmsNorm(d.data(), c.dim, L.ffn_post_norm, c.rms_eps);
    for (int i = 0; i < c.dim; ++i) row[i] += d[i];
  }
}

}  // namespace

std::vector<double> ReferenceLogits(const Model& model, const std::vector<int32_t>& tokens,
                                    const ReferenceOptions& options) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  Rows x;
  std::vector<float> e(static_cast<size_t>(c.dim));
  for (int32_t tok : tokens) {
    DequantizeRow(w.tok_embd.type, w.tok_embd.row(tok), e.data(), c.dim);
    Vec row(e.begin(), e.end());
    if (c.scale_embeddings) {
      for (double& v : row) v *= std::sqrt(static_cast<double>(c.dim));
    }
    x.push_back(std::move(row));
  }
  uint64_t jitter = 1;
  for (int l = 0; l < c.n_layers; ++l) {
    AttentionBlock(c, w.layers[static_cast<size_t>(l)], l, x);
    FfnBlock(c, w.layers[static_cast<size_t>(l)], options, jitter, x);
  }
  Vec last = x.back();
  RmsNorm(last.data(), c.dim, w.output_norm, c.rms_eps);
  Vec logits = MatVec(ToDense(w.output), last);
  if (c.final_softcap > 0) {
    for (double& v : logits) v = c.final_softcap * std::tanh(v / c.final_softcap);
  }
  return logits;
}

}  // namespace pinfer::testing
