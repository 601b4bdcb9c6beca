"""A small residual CNN as source text, for tests that write a user model file
(``PATH.py:build``) or exec it: conv+BN+ReLU, a residual block, mean, linear; input
1x3x8x8."""

SOURCE = '''
import torch
from torch import nn


class ResBlockNet(nn.Module):
    """conv+BN+ReLU, a residual block (conv+BN+ReLU, conv, + skip, ReLU), mean, linear."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c3 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        z = torch.relu(self.b2(self.c2(y)))
        return self.fc(torch.relu(self.c3(z) + y).mean((2, 3)))


def build():
    return ResBlockNet().eval(), torch.zeros(1, 3, 8, 8)
'''
