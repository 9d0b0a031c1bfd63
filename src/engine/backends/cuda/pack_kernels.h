// Row movement and conversions for padding-free execution, all on row-major [rows, cols] data:
//   gather:  dst[r] = src[index[r]]            (pack real tokens; gather [CLS] rows)
//   scatter: dst[index[r]] = src[r], every other dst row set to zero   (unpack when asked)
//   convert: element type changes (float32 <-> FP16/BF16), for weights and graph outputs.
// Element size is given in bytes, so one kernel serves every type.
#pragma once

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

struct RowMoveArgs {
  int64_t rows = 0;      // rows of `index` (rows moved)
  int64_t dst_rows = 0;  // scatter only: rows of dst
  int64_t row_bytes = 0;
  const int32_t* index = nullptr;
  const void* src = nullptr;
  void* dst = nullptr;
};

// row_bytes must be even (FP16/BF16 rows of any width); 16-byte words where sizes and addresses
// allow, else 4- or 2-byte ones.
bool RowMoveCanImplement(const RowMoveArgs& args);
size_t RowMoveWorkspaceSize(const RowMoveArgs& args);
cudaError_t GatherRowsRun(const RowMoveArgs& args, void* workspace, cudaStream_t stream);
cudaError_t ScatterRowsRun(const RowMoveArgs& args, void* workspace, cudaStream_t stream);

// float32 -> FP16/BF16 and FP16/BF16 -> float32, `n` elements.
cudaError_t ConvertFromFloat32(DataType to, const float* src, void* dst, int64_t n,
                               cudaStream_t stream);
cudaError_t ConvertToFloat32(DataType from, const void* src, float* dst, int64_t n,
                             cudaStream_t stream);

}  // namespace surge::engine::cuda
