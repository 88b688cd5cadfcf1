"""Datasets (model-resolution .npz clips) and encoded videos of simulated scenes."""
