"""bookie"""
