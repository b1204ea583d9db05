"""What builds on a trained agent (layer 3): a portable greedy `Policy` (`policy`), smaller
agents (`compress`), self-play matches and Elo (`selfplay`) and recorded demonstrations
(`demos`)."""
