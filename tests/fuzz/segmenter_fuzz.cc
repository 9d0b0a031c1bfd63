// libFuzzer target for the jieba-compatible segmenter and the parsers behind it.
// The first byte picks what the rest of the input feeds:
//   0: Segmenter::Cut (HMM on and off) - spans must tile the input, LCut must agree in count;
//   1: PrefixDict::Parse (jieba dictionary text);
//   2: HmmModel::FromSources (three Python-literal tables separated by NUL bytes);
//   3: user dictionary lines loaded into a clone of the shared segmenter, then a cut.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "text/hmm_model.h"
#include "text/jieba_dict.h"
#include "text/segmenter.h"

namespace {

surge::text::Segmenter& Shared() {
  static std::unique_ptr<surge::text::Segmenter> seg = [] {
    auto r = surge::text::Segmenter::Create();
    if (!r.ok()) {
      fprintf(stderr, "%s\nrun scripts/setup to install python3-jieba\n",
              r.status().ToString().c_str());
      std::abort();
    }
    return std::move(r).value();
  }();
  return *seg;
}

void CheckTiles(std::string_view text, const std::vector<surge::text::WordSpan>& spans) {
  uint64_t pos = 0;
  for (const auto& w : spans) {
    if (w.offset != pos || w.size == 0) std::abort();
    pos += w.size;
  }
  if (pos != text.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 4;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (mode) {
    case 0: {
      auto& seg = Shared();
      std::vector<surge::text::WordSpan> spans;
      seg.Cut(in, &spans, true);
      CheckTiles(in, spans);
      if (seg.LCut(in, true).size() != spans.size()) std::abort();
      spans.clear();
      seg.Cut(in, &spans, false);
      CheckTiles(in, spans);
      break;
    }
    case 1: {
      auto d = surge::text::PrefixDict::Parse(in, "fuzz");
      if (d.ok()) {
        auto n = d->Find(in.substr(0, in.find(' ')));
        if (n != surge::text::PrefixDict::kNone && d->Freq(n) < 0) std::abort();
      }
      break;
    }
    case 2: {
      size_t a = in.find('\0');
      size_t b = a == std::string_view::npos ? a : in.find('\0', a + 1);
      if (b == std::string_view::npos) break;
      auto m = surge::text::HmmModel::FromSources(in.substr(0, a), in.substr(a + 1, b - a - 1),
                                                  in.substr(b + 1));
      if (m.ok()) {
        std::u32string cps = U"中文分词测试";
        std::vector<uint8_t> states, back;
        std::vector<double> scratch;
        m->Viterbi(cps.data(), cps.size(), &states, &scratch, &back);
        if (states.size() != cps.size()) std::abort();
      }
      break;
    }
    case 3: {
      if (in.size() > 256) break;
      auto clone = Shared().Clone();
      auto& seg = *clone;
      (void)seg.LoadUserDictText(in, "fuzz");
      std::vector<surge::text::WordSpan> spans;
      seg.Cut(in, &spans);
      CheckTiles(in, spans);
      break;
    }
  }
  return 0;
}
