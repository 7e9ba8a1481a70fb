"""Altair charts of the paper figures, drawn from view rows only: one module per paper (clark, kovaleva,
pascual), compare for charts across models, common for what they share. presentation/chart_registry.py
says which view each chart draws."""
