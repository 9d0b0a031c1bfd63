# Sourced by the GPU-machine scripts (scripts/gpu/check, check_quant, ab): unpack_pack FILE unpacks
# a pack made by `--pack` into a fresh folder, sets RUN to it, and puts its libraries and the
# machine's cuBLAS and cuDNN (the CUDA toolkit's, or the pip wheels') on LD_LIBRARY_PATH.
unpack_pack() {
  RUN=$(mktemp -d)
  tar -C "$RUN" -xJf "$1" || { echo "cannot unpack $1"; return 1; }
  local cuda_dirs py_cublas
  cuda_dirs=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null |
    tr '\n' ':')
  py_cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), "lib"))' 2>/dev/null || true)
  # cuDNN (surge_attention_bench): the machine's own, beside the toolkit or in PyTorch's wheel.
  local py_cudnn
  py_cudnn=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0] + "/lib")' 2>/dev/null || true)
  export LD_LIBRARY_PATH="$RUN/lib:${cuda_dirs}${py_cublas}:${py_cudnn:+$py_cudnn:}${LD_LIBRARY_PATH:-}"
}
