"""The embedded demo model: procedural scenes, a small FLUX.2 transformer run through mflux's
real FLUX.2 loop, a PCA latent codec, a checker, and the training code that made the weights."""
