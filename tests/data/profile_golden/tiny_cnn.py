import torch
from torch import nn


class SmallCNN(nn.Module):
    """conv 3->4 + BN + ReLU on 3x16x16, 2x2 max pool, conv 4->6, flatten, linear 384->5."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 8 * 8, 5)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(torch.relu(self.conv2(x)), 1))


def build():
    return SmallCNN(), torch.zeros(1, 3, 16, 16)
