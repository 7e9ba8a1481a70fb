"""Comparing models: which head of one model behaves like which head of another."""
