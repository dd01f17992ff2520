"""Volcano's Job plugins (env, svc, ssh, pytorch, tensorflow, mpi, ray): one module each, one registry
(:mod:`scheduler.controllers.jobplugins.registry`); what they share is in ``base``."""
