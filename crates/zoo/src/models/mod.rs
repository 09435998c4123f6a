//! The networks. Each follows a published reference implementation so that parameter
//! counts match exactly (tests/published.rs checks them); deviations are noted where
//! they occur.

mod bert;
mod cnn;
mod densenet;
mod inception;
mod resnet;

use crate::ZooEntry;

pub(crate) const ENTRIES: &[ZooEntry] = &[
    ZooEntry {
        name: "lenet-mnist",
        description: "LeNet-5 on 28x28 MNIST digits (ReLU, max pooling)",
        build: cnn::lenet,
    },
    ZooEntry {
        name: "autotm-mnist",
        description: "the reference system's MNIST network (Flux model zoo: 3x3 convs 16-32-32, dense 288-10)",
        build: cnn::autotm_mnist,
    },
    ZooEntry { name: "mlp", description: "multilayer perceptron 784-1024-1024-10 on MNIST", build: cnn::mlp },
    ZooEntry {
        name: "vgg16",
        description: "VGG-16 on 224x224 ImageNet (torchvision layout, no dropout)",
        build: cnn::vgg16,
    },
    ZooEntry {
        name: "vgg19",
        description: "VGG-19 on 224x224 ImageNet (torchvision layout, no dropout)",
        build: cnn::vgg19,
    },
    ZooEntry { name: "resnet18", description: "ResNet-18 on 224x224 ImageNet (torchvision)", build: resnet::resnet18 },
    ZooEntry {
        name: "resnet50",
        description: "ResNet-50 v1.5 on 224x224 ImageNet (torchvision)",
        build: resnet::resnet50,
    },
    ZooEntry {
        name: "resnet200",
        description: "ResNet-200 (bottleneck blocks 3-24-36-3) on 224x224 ImageNet",
        build: resnet::resnet200,
    },
    ZooEntry {
        name: "densenet121",
        description: "DenseNet-121 (k=32) on 224x224 ImageNet (torchvision)",
        build: densenet::densenet121,
    },
    ZooEntry {
        name: "densenet264",
        description: "DenseNet-264 (k=32, blocks 6-12-64-48) on 224x224 ImageNet",
        build: densenet::densenet264,
    },
    ZooEntry {
        name: "inception-v3",
        description: "Inception v3 on 299x299 ImageNet (torchvision, no auxiliary head)",
        build: inception::inception_v3,
    },
    ZooEntry {
        name: "bert-base",
        description: "BERT-base encoder (12 layers, 768 wide, seq 128) with a token-classification head",
        build: bert::bert_base,
    },
    ZooEntry {
        name: "bert-tiny",
        description: "BERT-tiny encoder (2 layers, 128 wide, seq 128) with a token-classification head",
        build: bert::bert_tiny,
    },
];
