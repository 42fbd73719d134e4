"""tokenbook.rl"""
