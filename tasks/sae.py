"""A sparse autoencoder on cached activations (Bricken et al. 2023 / the SAE interpretability recipe).

f = ReLU((x − b_dec) W_enc + b_enc), x̂ = f W_dec + b_dec, trained on ‖x − x̂‖² + λ‖f‖₁ with the decoder's rows kept
at unit norm, so the L1 penalty cannot be dodged by shrinking codes and growing the decoder.
"""

from __future__ import annotations

import torch
from torch import nn

from paperflows.core.seeding import torch_generator, torch_seeded


class SparseAutoencoder(nn.Module):
    """``d`` input dimensions, ``n_latents`` dictionary atoms (the rows of ``decoder``, (n_latents, d))."""

    def __init__(self, d: int, n_latents: int) -> None:
        super().__init__()
        self.encoder = nn.Parameter(torch.randn(d, n_latents) / d ** 0.5)
        self.encoder_bias = nn.Parameter(torch.zeros(n_latents))
        self.decoder = nn.Parameter(self.encoder.detach().T.clone())
        self.decoder_bias = nn.Parameter(torch.zeros(d))
        self.normalise_decoder()

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        self.decoder /= self.decoder.norm(dim=1, keepdim=True).clamp(min=1e-12)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latent codes (n, n_latents) of activations ``x`` (n, d)."""
        return torch.relu((x - self.decoder_bias) @ self.encoder + self.encoder_bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reconstruction (n, d) and codes (n, n_latents)."""
        codes = self.encode(x)
        return codes @ self.decoder + self.decoder_bias, codes


def train_sae(activations: torch.Tensor, n_latents: int, *, l1: float, epochs: int, batch_size: int, lr: float,
              seed: int) -> SparseAutoencoder:
    """An SAE fitted to ``activations`` (n, d) with Adam on shuffled mini-batches; deterministic under ``seed``."""
    with torch_seeded(seed):
        sae = SparseAutoencoder(activations.shape[1], n_latents)
    # Start the decoder bias at the data mean, so codes explain deviations from it.
    with torch.no_grad():
        sae.decoder_bias.copy_(activations.mean(dim=0))
    optimiser = torch.optim.Adam(sae.parameters(), lr=lr)
    generator = torch_generator(seed)
    for _ in range(epochs):
        order = torch.randperm(len(activations), generator=generator)
        for start in range(0, len(order), batch_size):
            x = activations[order[start:start + batch_size]]
            reconstruction, codes = sae(x)
            loss = (reconstruction - x).pow(2).sum(dim=1).mean() + l1 * codes.abs().sum(dim=1).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            sae.normalise_decoder()
    return sae


@torch.no_grad()
def explained_variance(sae: SparseAutoencoder, activations: torch.Tensor) -> float:
    """1 − ‖x − x̂‖² / ‖x − mean x‖² over ``activations`` (n, d)."""
    reconstruction, _ = sae(activations)
    residual = (activations - reconstruction).pow(2).sum()
    return float(1 - residual / (activations - activations.mean(dim=0)).pow(2).sum())
