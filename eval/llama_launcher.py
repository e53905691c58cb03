"""Run ``llama_cpp.server`` with llama.cpp's extra CPU buffer types turned off.

On a CPU that reports AMX and AVX-512, llama-cpp-python 0.3.36 loads the model with
llama.cpp's extra buffer types (AMX, weight repacking), and its server then dies at the
first request with a general protection fault in ``libggml-cpu.so``. The model option
``use_extra_bufts=False`` avoids it, but the server's settings do not offer it: when they
do, it is passed as a flag; otherwise llama_cpp's default model parameters are wrapped to
turn it off before the server loads the model.

This runs under the server's own venv (``local_server.py`` starts it), with the server's
arguments::

    python eval/llama_launcher.py --model F --host 127.0.0.1 --port P ...
"""

import sys


def without_extra_buffer_types():
    """Return ``argv`` additions, or patch llama_cpp, so models load without extra bufts."""
    from llama_cpp.server.settings import ModelSettings

    if "use_extra_bufts" in ModelSettings.model_fields:
        return ["--use_extra_bufts", "False"]
    import llama_cpp.llama_cpp as native

    if "use_extra_bufts" not in dict(native.llama_model_params._fields_):
        raise SystemExit("this llama_cpp has no use_extra_bufts model parameter")
    default_params = native.llama_model_default_params

    def params_without_extra_bufts():
        params = default_params()
        params.use_extra_bufts = False
        return params

    native.llama_model_default_params = params_without_extra_bufts
    return []


def main():
    """Start the server with the command line's arguments (plus the flag, when it exists)."""
    sys.argv[1:] += without_extra_buffer_types()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
