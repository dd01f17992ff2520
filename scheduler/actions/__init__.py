"""Built-in actions, one module each; :mod:`scheduler.builtins` registers them."""
