# Unity builds (-DCMAKE_UNITY_BUILD=ON, as scripts/test configures): CMake compiles each target's
# sources in batches, one translation unit per batch, which on two cores roughly halves the build
# (template code is generated once per batch instead of once per file). Sources whose file-local
# helpers share a name with another file's of the same target stay out of the batches, as do the
# generated protobuf sources. Plain builds are unaffected.
if(NOT CMAKE_UNITY_BUILD)
  return()
endif()

function(surge_unity_skip target)
  get_target_property(dir ${target} SOURCE_DIR)
  list(TRANSFORM ARGN PREPEND "${dir}/")
  set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target}
                              PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

set_target_properties(surge_serve_proto PROPERTIES UNITY_BUILD OFF)
# The CUDA backend's host code and its GPU tests: small, and built only where nvcc is.
if(SURGE_CUDA)
  set_target_properties(surge_cuda PROPERTIES UNITY_BUILD OFF)
  if(SURGE_TESTS)
    set_target_properties(cuda_backend_test cuda_model_test cuda_quant_test
                          PROPERTIES UNITY_BUILD OFF)
  endif()
endif()
surge_unity_skip(surge_ir eval_fused.cc eval_reduce.cc eval_shape.cc)
surge_unity_skip(surge_passes passes/fuse_l2_normalize.cc)
# Each includes simd_begin.inc once per instruction set (namespaces simd_avx2 / simd_avx512).
surge_unity_skip(surge_backends backends/cpu/attention.cc backends/cpu/bias_activation.cc
                 backends/cpu/embed_layer_norm.cc backends/cpu/gelu.cc backends/cpu/layer_norm.cc
                 backends/cpu/skip_layer_norm.cc)
surge_unity_skip(surge_builder builder/plan_assembly.cc)
surge_unity_skip(surge_text segmenter.cc simhash.cc)
surge_unity_skip(surge_stream post.cc)
surge_unity_skip(surge serve.cc)
if(SURGE_TESTS)
  surge_unity_skip(text_test unicode_test.cc segmenter_test.cc sentencepiece_tokenizer_test.cc)
  surge_unity_skip(import_test import/hf_import_test.cc)
  surge_unity_skip(passes_test passes/fusion_basic_test.cc)
  surge_unity_skip(runtime_test runtime/graph_codec_test.cc)
  surge_unity_skip(cpu_backend_test backends/cpu/quant_linear_test.cc)
endif()
