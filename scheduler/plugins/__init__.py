"""Built-in plugins, one module each; :mod:`scheduler.builtins` registers them."""
