"""Child side of :mod:`lm_eval_fin.sandbox`: runs ONE model-written snippet, then exits.

The parent (:mod:`lm_eval_fin.sandbox.runner`) compiles the modules of :data:`MODULES` once
and starts, per snippet, ``python -I -S -c`` :data:`STUB` in a fresh temporary directory.
The stub reads the compiled modules and the job (a dict the parent built) from stdin, makes
them a package of their own (:data:`PACKAGE`: their relative imports resolve as they do
here) and calls :func:`lm_eval_fin.sandbox.child.snippet.main`. On the result descriptor the
job names, the child writes the job's token once the sandbox is set up, and at the end the
token again, ``ok`` or ``error``, the failure category (empty when ok) and the value's repr
or the error, one per line.

Standard library only, and nothing from this package's parent: ``lm_eval_fin`` is not
importable in the child (``-I -S``, no site-packages), and this ``__init__`` does not run
there. Sending compiled code rather than having the child import files also spares every
child the compiling, which was most of the sandbox's own cost per snippet.

The child runs in two stages, in two interpreters:

1. Confinement (:mod:`.confine`): namespaces, Landlock and the seccomp filter
   (:mod:`.seccomp`), through ``_ctypes``; it ends by starting a fresh interpreter, which
   the same stub starts the same way.
2. The snippet (:mod:`.snippet`): limits, privileges dropped, numpy and pandas offered, the
   audit hook (:mod:`.audit`), then the snippet.

:mod:`lm_eval_fin.sandbox` describes the layers and what they leave open.
"""

# The child's modules, each after those it imports (the stub runs them in this order).
MODULES = ("seccomp", "audit", "confine", "snippet")
PACKAGE = "sandbox_child"  # the package the stub makes of them in the child
# What the child interpreter runs: read the message from stdin, build the package from the
# compiled modules, hand the entry point the job. A spec (not just __package__) for each
# module: __package__ alone stops counting for relative imports in Python 3.15. Its type is
# taken from sys's own spec: importing importlib here would bind its folder by the real
# path, which the snippet's user may not read after the privileges go.
STUB = f"""\
import marshal, os, sys
chunks = []
while chunk := os.read(0, 1 << 16):
    chunks.append(chunk)
modules, job = marshal.loads(b"".join(chunks))
del chunks
package = sys.modules["{PACKAGE}"] = type(sys)("{PACKAGE}")
package.__path__ = []
for name, code in modules:
    module = sys.modules[f"{PACKAGE}.{{name}}"] = type(sys)(f"{PACKAGE}.{{name}}")
    module.__spec__ = type(sys.__spec__)(module.__name__, None)
    module.__package__ = "{PACKAGE}"
    exec(code, module.__dict__)
sys.modules["{PACKAGE}.snippet"].main(job, modules)
"""
