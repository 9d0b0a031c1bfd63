// placeholder so the module library has a source; replaced by the module's code.
namespace surge::engine {}
