"""Reusable pieces shared by the paper flows: the flow contract, data, training, statistics, claims, reporting.

A library: it imports nothing from ``flows/`` or ``paperflows/``, and importing it changes no settings.
"""
