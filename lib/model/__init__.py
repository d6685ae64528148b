"""What a model family is: the LanguageModel interface (interface.py) both
families implement, the registry that names them (one line per family),
token sampling shared by their generate(), and `make export`'s dispatch to a
family's exporter. Each family's options live beside its code (gpt2/Kconfig,
hamt/Kconfig).
"""
